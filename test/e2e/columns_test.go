package e2e

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestEveryColumnFromTheDriver(t *testing.T) {
	t.Parallel()
	_, tb := recordRows(t, opts{scenario: "@every-column"}, 0, 15, 20*time.Second)
	if len(tb.rows) < 15 {
		t.Fatalf("%d rows, want >= 15", len(tb.rows))
	}

	// Every value is constant, so every row must carry exactly these cells.
	want := []struct{ col, cell string }{
		{"gpu_temp", "61"},
		{"gpu_tlimit", "29"},              // threshold gpu_max 90 - temp 61
		{"power_instant", "333.47"},       // the sim reports mW (333470); W with two decimals
		{"power_limit", "444"},            // GetPowerManagementLimit
		{"pstate", "3"},                   // P3
		{"gpu_clock", "1111"},             // clock graphics
		{"mem_clock", "1333"},             // clock memory
		{"sm_clock", "1222"},              // clock SM
		{"gpu_util", "41"},                //
		{"mem_util", "42"},                //
		{"enc_util", "43"},                // slow tier, carried between reads
		{"dec_util", "44"},                // slow tier
		{"vram_used_mb", "5555"},          // GetMemoryInfo_v2: used = mem_used (v1 would add the 512 MiB reserved)
		{"pcie_gen", "4"},                 // slow tier
		{"pcie_width", "8"},               // slow tier
		{"pcie_replay", "7"},              // field 94
		{"pcie_tx_bytes", "123456789012"}, // field 197
		{"pcie_rx_bytes", "98765432101"},  // field 198
		{"mem_temp", "71"},                // field 82
		{"power_enforced_limit", "433"},   // GetEnforcedPowerLimit / field 190, not plimit
		{"throttle_bitmask", "0x0044"},    // sw_power_cap 0x4 | hw_thermal 0x40
		{"throttle_reasons", "SwPowerCap|HwThermalSlowdown"},
		{"fan0_speed_pct", "31"},
		{"fan0_target_pct", "33"},
		{"fan1_speed_pct", "32"},
		{"fan1_target_pct", "34"},
		// Thermal sensor 0 reads 62, not the GPU temperature 61: a swap of
		// the two shows.
		{"sensor0_temp", "62"},
		{"sensor0_target", "6"},
		{"sensor0_controller", "9"},
		// Health counters: slow tier, carried between reads.
		{"ecc_mode", "1"}, {"ecc_mode_pending", "0"},
		{"ecc_sbe_volatile", "101"}, {"ecc_dbe_volatile", "102"}, {"ecc_sbe_aggregate", "103"}, {"ecc_dbe_aggregate", "104"},
		{"retired_pages_sbe", "105"}, {"retired_pages_dbe", "106"}, {"retired_pages_pending", "1"},
		{"remap_correctable", "107"}, {"remap_uncorrectable", "108"}, {"remap_pending", "1"}, {"remap_failure", "1"},
		{"pcie_replay_rollover", "109"}, {"pcie_l0_recovery", "110"}, {"pcie_correctable", "111"}, {"pcie_naks_received", "112"},
		{"pcie_receiver_errors", "113"}, {"pcie_bad_tlp", "114"}, {"pcie_naks_sent", "115"}, {"pcie_bad_dllp", "116"},
		{"pcie_nonfatal", "117"}, {"pcie_fatal", "118"}, {"pcie_unsupported_req", "119"}, {"pcie_lcrc", "120"},
		{"clk_sw_power_cap_s", "1.500"}, {"clk_sync_boost_s", "2.500"}, {"clk_sw_thermal_s", "3.500"}, {"clk_hw_thermal_s", "4.500"},
		{"clk_hw_power_brake_s", "5.500"}, {"clk_board_limit_s", "6.500"}, {"clk_reliability_s", "7.500"},
		// 2 links, link 1 inactive; errors: malformed 1+1, rx 2+2, tx discards 4 on link 0
		{"nvlink_links", "2"}, {"nvlink_up", "1"}, {"nvlink_errors", "10"}, {"nvlink_recoveries", "10"}, {"nvlink_recovery_failed", "3"},
		{"c2c_links", "1"}, {"c2c_up", "1"}, {"c2c_errors", "13"},
		{"recovery_action", "2"},
		// The getters (SRAM ECC: parity is not simulated; memory repair).
		{"sram_correctable", "121"}, {"sram_uncorrectable_secded", "122"}, {"sram_uncorrectable_parity", "0"}, {"sram_threshold_exceeded", "0"},
		{"channel_repair_pending", "1"}, {"tpc_repair_pending", "0"}, {"memory_unrepairable", "1"},
	}

	// Every column of the header is checked, by the table or below.
	checked := map[string]bool{"timestamp": true, "energy_mj": true, "dmesg_time": true, "flags": true}
	for _, w := range want {
		checked[w.col] = true
		if _, ok := tb.col[w.col]; !ok {
			t.Errorf("no column %s in header %v", w.col, tb.header)
		}
	}
	for _, c := range tb.header {
		if !checked[c] {
			t.Errorf("column %s is not checked by this test", c)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// flags: power 75 % of the limit: no SPUR_THROT; 61 C: no inversion.
	// The health reasons begin on the first row and are flagged there only.
	for i, row := range tb.rows {
		f := tb.get(row, "flags")
		switch {
		case i == 0 && f != "HEALTH_CRIT(ecc_dbe)|HEALTH_CRIT(remap_failure)|HEALTH_CRIT(nvlink_down)|HEALTH_CRIT(recovery_action)|HEALTH_CRIT(memory_unrepairable)|HEALTH_WARN(remap_pending)|HEALTH_WARN(repair_pending)":
			t.Errorf("row 1 flags %q", f)
		case i > 0 && f != "":
			t.Errorf("row %d flags %q, want none", i+1, f)
		}
	}

	var prevEnergy uint64
	var prevKernel float64
	for i, row := range tb.rows {
		for _, w := range want {
			if got := tb.get(row, w.col); got != w.cell {
				t.Errorf("row %d: %s = %q, want %q", i+1, w.col, got, w.cell)
			}
		}
		parseTime(t, tb.get(row, "timestamp"))

		e, err := strconv.ParseUint(tb.get(row, "energy_mj"), 10, 64)
		if err != nil {
			t.Errorf("row %d: energy_mj %q: %v", i+1, tb.get(row, "energy_mj"), err)
		} else if i > 0 && e < prevEnergy {
			t.Errorf("row %d: energy_mj %d < previous %d", i+1, e, prevEnergy)
		}
		prevEnergy = e

		k, err := strconv.ParseFloat(tb.get(row, "dmesg_time"), 64)
		if err != nil || !strings.Contains(tb.get(row, "dmesg_time"), ".") {
			t.Errorf("row %d: dmesg_time %q is not seconds.micros", i+1, tb.get(row, "dmesg_time"))
		} else if i > 0 && k <= prevKernel {
			t.Errorf("row %d: dmesg_time %v not after previous %v", i+1, k, prevKernel)
		}
		prevKernel = k
	}

	// The energy counter integrates 333.47 W: across the run it grows by about
	// power x elapsed time (a counter swapped with a constant would not).
	first, last := tb.rows[0], tb.rows[len(tb.rows)-1]
	e0, _ := strconv.ParseFloat(tb.get(first, "energy_mj"), 64)
	e1, _ := strconv.ParseFloat(tb.get(last, "energy_mj"), 64)
	dt := parseTime(t, tb.get(last, "timestamp")).Sub(parseTime(t, tb.get(first, "timestamp"))).Seconds()
	if wantMJ := 333.47 * 1000 * dt; math.Abs((e1-e0)-wantMJ) > 0.1*wantMJ {
		t.Errorf("energy_mj grew by %.0f mJ over %.3f s, want about %.0f (333.47 W)", e1-e0, dt, wantMJ)
	}
}

// A field GetFieldValues refuses (the call succeeds, the entry does not) is
// read by its own call in the same sample, so the first row is complete too
// (not only the rows after it: once, row 1 had an empty power_enforced_limit).
// This runs the C path (batch.c) of the real binary.
func TestRefusedFieldFilledFromTheFirstRow(t *testing.T) {
	t.Parallel()
	_, tb := recordRows(t, opts{scenario: `gpus 1
gpu 0 power 250
gpu 0 enforced 433
gpu 0 pcie_replay 7
gpu 0 fail field 190 not_supported
gpu 0 fail field 186 not_supported
`}, 0, 3, 20*time.Second)
	for i, row := range tb.rows {
		for _, w := range []struct{ col, cell string }{
			{"power_enforced_limit", "433"}, // field 190 refused: GetEnforcedPowerLimit
			{"power_instant", "250.00"},     // field 186 refused: GetPowerUsage
			{"pcie_replay", "7"},            // field 94 answered
		} {
			if got := tb.get(row, w.col); got != w.cell {
				t.Errorf("row %d: %s = %q, want %q", i+1, w.col, got, w.cell)
			}
		}
	}
}
