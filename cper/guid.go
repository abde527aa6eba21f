package cper

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
)

// GUID is a UEFI GUID as it is stored: the first three fields little-endian.
type GUID [16]byte

// String is the GUID in its registry form, lower case:
// "d995e954-bbc1-430f-ad91-b44dcb3c6f35".
func (g GUID) String() string {
	return fmt.Sprintf("%08x-%04x-%04x-%x-%x", binary.LittleEndian.Uint32(g[0:4]),
		binary.LittleEndian.Uint16(g[4:6]), binary.LittleEndian.Uint16(g[6:8]), g[8:10], g[10:16])
}

// ParseGUID parses the registry form; it panics on a malformed one (it is
// used only for the constant tables below and in tests).
func ParseGUID(s string) GUID {
	b, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	if err != nil || len(b) != 16 || len(s) != 36 {
		panic("cper: bad GUID " + s)
	}
	var g GUID
	binary.LittleEndian.PutUint32(g[0:4], binary.BigEndian.Uint32(b[0:4]))
	binary.LittleEndian.PutUint16(g[4:6], binary.BigEndian.Uint16(b[4:6]))
	binary.LittleEndian.PutUint16(g[6:8], binary.BigEndian.Uint16(b[6:8]))
	copy(g[8:], b[8:])
	return g
}

// sectionNames are the section types of UEFI 2.10 Appendix N.2.2 (and the
// vendor ones Linux's cper.c names); an unknown type is written as its GUID.
var sectionNames = map[GUID]string{
	ParseGUID("9876ccad-47b4-4bdb-b65e-16f193c4f3db"): "processor_generic",
	ParseGUID("dc3ea0b0-a144-4797-b95b-53fa242b6e1d"): "processor_ia32_x64",
	ParseGUID("e19e3d16-bc11-11e4-9caa-c2051d5d46b0"): "processor_arm",
	ParseGUID("a5bc1114-6f64-4ede-b863-3e83ed7c83b1"): "platform_memory",
	ParseGUID("61ec04fc-48e6-d813-25c9-8daa44750b12"): "platform_memory2",
	ParseGUID("d995e954-bbc1-430f-ad91-b44dcb3c6f35"): "pcie",
	ParseGUID("81212a96-09ed-4996-9471-8d729c8e69ed"): "firmware_error_record",
	ParseGUID("c5753963-3b84-4095-bf78-eddad3f9c9dd"): "pci_bus",
	ParseGUID("eb5e4685-ca66-4769-b6a2-26068b001326"): "pci_device",
	ParseGUID("5b51fef7-c79d-4434-8f1b-aa62de3e2c64"): "dmar_generic",
	ParseGUID("71761d37-32b2-45cd-a7d0-b0fedd93e8cf"): "dmar_vtd",
	ParseGUID("036f84e1-7f37-428c-a79e-575fdfaa84ec"): "dmar_iommu",
	ParseGUID("80b9efb4-52b5-4de3-a777-68784b771048"): "cxl_protocol",
	ParseGUID("6d5244f2-2712-11ec-bea7-cb3fdb95c786"): "nvidia", // Linux CPER_SEC_NVIDIA (Grace, GPU)
}

// notifyNames are the notification types of UEFI Appendix N.2.1.1.
var notifyNames = map[GUID]string{
	ParseGUID("2dce8bb1-bdd7-450e-b9ad-9cf4ebd4f890"): "CMC",
	ParseGUID("4e292f96-d843-4a55-a8c2-d481f27ebeee"): "CPE",
	ParseGUID("e8f56ffe-919c-4cc5-ba88-65abe14913bb"): "MCE",
	ParseGUID("cf93c01f-1a16-4dfc-b8bc-9c4daf67c104"): "PCIe",
	ParseGUID("cc5263e8-9308-454a-89d0-340bd39bc98e"): "INIT",
	ParseGUID("5bad89ff-b7e6-42c9-814a-cf2485d6e98a"): "NMI",
	ParseGUID("3d61a466-ab40-409a-a698-f362d464b38f"): "Boot",
	ParseGUID("667dd791-c6b3-4c27-8a6b-0f8e722deb41"): "DMAr",
	ParseGUID("9a78788a-bbe8-11e4-809e-67611e5d46b0"): "SEA",
	ParseGUID("5c284c81-b0ae-4e87-a322-b04c85624323"): "SEI",
	ParseGUID("09a9d5ac-5204-4214-96e5-94992e752bcd"): "PEI",
}

// SectionName is the section type's name, or its GUID when unknown.
func SectionName(g GUID) string {
	if n, ok := sectionNames[g]; ok {
		return n
	}
	return g.String()
}

// notifyName is the notification type's name, its GUID when unknown, "" for
// the zero GUID (not given).
func notifyName(g GUID) string {
	if n, ok := notifyNames[g]; ok {
		return n
	}
	if g == (GUID{}) {
		return ""
	}
	return g.String()
}
