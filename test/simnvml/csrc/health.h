/*
 * health.h - the hardware health counters simnvml models (X-macro tables).
 *
 * One line per quantity: the scenario key (a METRIC: "gpu 0 ecc_sbe_vol 3",
 * "gpu 0 ramp nvlink3_rx_errors 0 50 10s"), the NVML field id that reads it
 * through nvmlDeviceGetFieldValues (0: read by a getter only), the health
 * group that decides whether a GPU class supports it, the value type the
 * driver reports it in, its default and the scale from scenario units.
 *
 *   SIMHF: GPU-level (scopeId ignored)
 *   SIMLF: per NVLink link (scopeId = link; UINT_MAX sums a counter over the links)
 *   SIMCF: per C2C link (scopeId = link)
 *
 * Types: U = NVML_VALUE_TYPE_UNSIGNED_INT, L = _UNSIGNED_LONG_LONG,
 * B = _UNSIGNED_LONG_LONG holding a packed BER (mantissa bits 8-11,
 * exponent bits 0-7: mantissa x 10^-exponent; the scenario gives the BER).
 *
 * Adjacent pairs matter: ecc_sbe_vol/ecc_sbe_agg and ecc_dbe_vol/ecc_dbe_agg
 * are set together by the aliases "ecc_sbe" and "ecc_dbe".
 */
#ifndef SIMHF
#define SIMHF(key, id, group, type, def, scale)
#endif
#ifndef SIMLF
#define SIMLF(key, id, group, type, def, scale)
#endif
#ifndef SIMCF
#define SIMCF(key, id, group, type, def, scale)
#endif

/* ECC mode and totals (volatile: since the driver loaded; aggregate: the GPU's life). */
SIMHF(ecc_current, NVML_FI_DEV_ECC_CURRENT, HG_ECC, U, 1, 1)
SIMHF(ecc_pending, NVML_FI_DEV_ECC_PENDING, HG_ECC, U, 1, 1)
SIMHF(ecc_sbe_vol, NVML_FI_DEV_ECC_SBE_VOL_TOTAL, HG_ECC, L, 0, 1)
SIMHF(ecc_sbe_agg, NVML_FI_DEV_ECC_SBE_AGG_TOTAL, HG_ECC, L, 0, 1)
SIMHF(ecc_dbe_vol, NVML_FI_DEV_ECC_DBE_VOL_TOTAL, HG_ECC, L, 0, 1)
SIMHF(ecc_dbe_agg, NVML_FI_DEV_ECC_DBE_AGG_TOTAL, HG_ECC, L, 0, 1)
/* Retired pages: pre-Ampere only. */
SIMHF(retired_sbe, NVML_FI_DEV_RETIRED_SBE, HG_RETIRED, L, 0, 1)
SIMHF(retired_dbe, NVML_FI_DEV_RETIRED_DBE, HG_RETIRED, L, 0, 1)
SIMHF(retired_pending, NVML_FI_DEV_RETIRED_PENDING, HG_RETIRED, U, 0, 1)
/* Row remapping: Ampere and later (HG_REMAP_PHANTOM answers SUCCESS with 0s). */
SIMHF(remap_cor, NVML_FI_DEV_REMAPPED_COR, HG_REMAP, U, 0, 1)
SIMHF(remap_unc, NVML_FI_DEV_REMAPPED_UNC, HG_REMAP, U, 0, 1)
SIMHF(remap_pending, NVML_FI_DEV_REMAPPED_PENDING, HG_REMAP, U, 0, 1)
SIMHF(remap_failure, NVML_FI_DEV_REMAPPED_FAILURE, HG_REMAP, U, 0, 1)
/* PCIe error counters (the replay counter itself is the "pcie_replay" metric). */
SIMHF(pcie_replay_rollover, NVML_FI_DEV_PCIE_REPLAY_ROLLOVER_COUNTER, HG_PCIE, L, 0, 1)
SIMHF(pcie_tx_bytes, NVML_FI_DEV_PCIE_COUNT_TX_BYTES, HG_PCIE, L, 0, 1)
SIMHF(pcie_rx_bytes, NVML_FI_DEV_PCIE_COUNT_RX_BYTES, HG_PCIE, L, 0, 1)
SIMHF(pcie_l0_recovery, NVML_FI_DEV_PCIE_L0_TO_RECOVERY_COUNTER, HG_PCIE, U, 0, 1)
SIMHF(pcie_correctable, NVML_FI_DEV_PCIE_COUNT_CORRECTABLE_ERRORS, HG_PCIE, U, 0, 1)
SIMHF(pcie_naks_received, NVML_FI_DEV_PCIE_COUNT_NAKS_RECEIVED, HG_PCIE, U, 0, 1)
SIMHF(pcie_receiver_errors, NVML_FI_DEV_PCIE_COUNT_RECEIVER_ERROR, HG_PCIE, U, 0, 1)
SIMHF(pcie_bad_tlp, NVML_FI_DEV_PCIE_COUNT_BAD_TLP, HG_PCIE, U, 0, 1)
SIMHF(pcie_naks_sent, NVML_FI_DEV_PCIE_COUNT_NAKS_SENT, HG_PCIE, U, 0, 1)
SIMHF(pcie_bad_dllp, NVML_FI_DEV_PCIE_COUNT_BAD_DLLP, HG_PCIE, U, 0, 1)
SIMHF(pcie_nonfatal, NVML_FI_DEV_PCIE_COUNT_NON_FATAL_ERROR, HG_PCIE, U, 0, 1)
SIMHF(pcie_fatal, NVML_FI_DEV_PCIE_COUNT_FATAL_ERROR, HG_PCIE, U, 0, 1)
SIMHF(pcie_unsupported_req, NVML_FI_DEV_PCIE_COUNT_UNSUPPORTED_REQ, HG_PCIE, U, 0, 1)
SIMHF(pcie_lcrc, NVML_FI_DEV_PCIE_COUNT_LCRC_ERROR, HG_PCIE, U, 0, 1)
/* Clock-event time, ns since the driver loaded (the scenario gives seconds). */
SIMHF(clkev_sw_power_cap, NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP, HG_CLKEV, L, 0, 1e9)
SIMHF(clkev_sync_boost, NVML_FI_DEV_CLOCKS_EVENT_REASON_SYNC_BOOST, HG_CLKEV, L, 0, 1e9)
SIMHF(clkev_sw_thermal, NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN, HG_CLKEV, L, 0, 1e9)
SIMHF(clkev_hw_thermal, NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN, HG_CLKEV, L, 0, 1e9)
SIMHF(clkev_hw_power_brake, NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN, HG_CLKEV, L, 0, 1e9)
SIMHF(clkev_board_limit, NVML_FI_DEV_PERF_POLICY_BOARD_LIMIT, HG_CLKEV, L, 0, 1e9)
SIMHF(clkev_reliability, NVML_FI_DEV_PERF_POLICY_RELIABILITY, HG_CLKEV, L, 0, 1e9)
/* Inventories: the value is the GPU's link count ("gpu SEL nvlinks N", "c2c_links N"). */
SIMHF(nvlink_count, NVML_FI_DEV_NVLINK_LINK_COUNT, HG_NVLINK, U, 0, 1)
SIMHF(c2c_count, NVML_FI_DEV_C2C_LINK_COUNT, HG_C2C, U, 0, 1)
/* GPU recovery action (nvmlDeviceGpuRecoveryAction_t). */
SIMHF(recovery_action, NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, HG_RECOVERY, U, 0, 1)
/* Getter-only quantities. */
SIMHF(hist_max, 0, HG_HISTOGRAM, U, 64, 1)
SIMHF(hist_high, 0, HG_HISTOGRAM, U, 0, 1)
SIMHF(hist_partial, 0, HG_HISTOGRAM, U, 0, 1)
SIMHF(hist_low, 0, HG_HISTOGRAM, U, 0, 1)
SIMHF(hist_none, 0, HG_HISTOGRAM, U, 0, 1)
SIMHF(channel_repair_pending, 0, HG_REPAIR, U, 0, 1)
SIMHF(tpc_repair_pending, 0, HG_REPAIR, U, 0, 1)
SIMHF(unrepairable, 0, HG_REPAIR, U, 0, 1)
SIMHF(sram_vol_cor, 0, HG_SRAM, L, 0, 1)
SIMHF(sram_vol_unc, 0, HG_SRAM, L, 0, 1)
SIMHF(sram_agg_cor, 0, HG_SRAM, L, 0, 1)
SIMHF(sram_agg_unc, 0, HG_SRAM, L, 0, 1)
SIMHF(sram_threshold, 0, HG_SRAM, U, 0, 1)
/* The NVLink fabric: probe completed, status success, every health mask
 * field reported healthy (bandwidth, routes, no recovery, configuration
 * correct, partition assigned, GFM connected: 0x51aa), summary healthy. */
SIMHF(fabric_state, 0, HG_FABRIC, U, NVML_GPU_FABRIC_STATE_COMPLETED, 1)
SIMHF(fabric_status, 0, HG_FABRIC, U, 0, 1)
SIMHF(fabric_health_mask, 0, HG_FABRIC, U, 0x51aa, 1)
SIMHF(fabric_health_summary, 0, HG_FABRIC, U, NVML_GPU_FABRIC_HEALTH_SUMMARY_HEALTHY, 1)
SIMHF(fabric_clique, 0, HG_FABRIC, U, 32766, 1)

/* NVLink per link: "nvlink3_state 0" (link 3), "nvlink_state 0" (every link). */
SIMLF(speed, NVML_FI_DEV_NVLINK_GET_SPEED, HG_NVLINK, U, 53125, 1)
SIMLF(state, NVML_FI_DEV_NVLINK_GET_STATE, HG_NVLINK, U, NVML_NVLINK_STATE_ACTIVE, 1)
SIMLF(version, NVML_FI_DEV_NVLINK_GET_VERSION, HG_NVLINK, U, NVML_NVLINK_VERSION_5_0, 1)
SIMLF(malformed, NVML_FI_DEV_NVLINK_COUNT_MALFORMED_PACKET_ERRORS, HG_NVLINK5, L, 0, 1)
SIMLF(buffer_overrun, NVML_FI_DEV_NVLINK_COUNT_BUFFER_OVERRUN_ERRORS, HG_NVLINK5, L, 0, 1)
SIMLF(rx_errors, NVML_FI_DEV_NVLINK_COUNT_RCV_ERRORS, HG_NVLINK5, L, 0, 1)
SIMLF(rx_remote, NVML_FI_DEV_NVLINK_COUNT_RCV_REMOTE_ERRORS, HG_NVLINK5, L, 0, 1)
SIMLF(rx_general, NVML_FI_DEV_NVLINK_COUNT_RCV_GENERAL_ERRORS, HG_NVLINK5, L, 0, 1)
SIMLF(local_integrity, NVML_FI_DEV_NVLINK_COUNT_LOCAL_LINK_INTEGRITY_ERRORS, HG_NVLINK5, L, 0, 1)
SIMLF(tx_discards, NVML_FI_DEV_NVLINK_COUNT_XMIT_DISCARDS, HG_NVLINK5, L, 0, 1)
SIMLF(recovery_ok, NVML_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_SUCCESSFUL_EVENTS, HG_NVLINK5, L, 0, 1)
SIMLF(recovery_failed, NVML_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_FAILED_EVENTS, HG_NVLINK5, L, 0, 1)
SIMLF(recovery_all, NVML_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_EVENTS, HG_NVLINK5, L, 0, 1)
SIMLF(eff_errors, NVML_FI_DEV_NVLINK_COUNT_EFFECTIVE_ERRORS, HG_NVLINK5, L, 0, 1)
SIMLF(eff_ber, NVML_FI_DEV_NVLINK_COUNT_EFFECTIVE_BER, HG_NVLINK5, B, 0, 1)
SIMLF(symbol_errors, NVML_FI_DEV_NVLINK_COUNT_SYMBOL_ERRORS, HG_NVLINK5, L, 0, 1)
SIMLF(symbol_ber, NVML_FI_DEV_NVLINK_COUNT_SYMBOL_BER, HG_NVLINK5, B, 0, 1)
/* Pre-Blackwell error counters: nvmlDeviceGetNvLinkErrorCounter only. */
SIMLF(dl_replay, 0, HG_NVLINK_LEGACY, L, 0, 1)
SIMLF(dl_recovery, 0, HG_NVLINK_LEGACY, L, 0, 1)
SIMLF(dl_crc_flit, 0, HG_NVLINK_LEGACY, L, 0, 1)
SIMLF(dl_crc_data, 0, HG_NVLINK_LEGACY, L, 0, 1)
SIMLF(dl_ecc_data, 0, HG_NVLINK_LEGACY, L, 0, 1)

/* C2C per link: "c2c0_status 0", "c2c_crc 5". */
SIMCF(status, NVML_FI_DEV_C2C_LINK_GET_STATUS, HG_C2C, U, 1, 1)
SIMCF(max_bw, NVML_FI_DEV_C2C_LINK_GET_MAX_BW, HG_C2C, U, 225000, 1)
SIMCF(crc, NVML_FI_DEV_C2C_LINK_ERROR_INTR, HG_C2C, L, 0, 1)
SIMCF(replay, NVML_FI_DEV_C2C_LINK_ERROR_REPLAY, HG_C2C, L, 0, 1)
SIMCF(replay_b2b, NVML_FI_DEV_C2C_LINK_ERROR_REPLAY_B2B, HG_C2C, L, 0, 1)

#undef SIMHF
#undef SIMLF
#undef SIMCF
