package snapshot

import (
	"fmt"
	"regexp"
	"strconv"
)

// nvmlBusID matches NVML's PCI bus id: domain (NVML prints 8 hex digits, older
// tools 4), bus, device, function. Device is 5 bits and function 3 bits in the
// PCI spec, checked after the match.
var nvmlBusID = regexp.MustCompile(`^([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$`)

// pciAddress converts NVML's bus id ("00000000:4B:00.0") to the form lspci
// and setpci print and accept ("0000:4b:00.0"). Anything that is not a strict
// PCI address is refused, so no outside text ever reaches a command line.
func pciAddress(busID string) (string, error) {
	m := nvmlBusID.FindStringSubmatch(busID)
	if m == nil {
		return "", fmt.Errorf("bus id %q is not a PCI address like 00000000:4B:00.0", busID)
	}
	domain, err := strconv.ParseUint(m[1], 16, 32)
	if err != nil {
		return "", fmt.Errorf("bus id %q: domain: %w", busID, err)
	}
	dev, _ := strconv.ParseUint(m[3], 16, 8) // two hex digits: cannot fail
	if dev > 0x1f {
		return "", fmt.Errorf("bus id %q: device %#x is above 0x1f", busID, dev)
	}
	bus, _ := strconv.ParseUint(m[2], 16, 8)
	// lspci prints the domain with at least 4 digits (%04x) and everything in
	// lower case; domains above 0xffff (VMD) keep their full width.
	return fmt.Sprintf("%04x:%02x:%02x.%s", domain, bus, dev, m[4]), nil
}
