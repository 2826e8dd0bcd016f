//! `[[device]]` and `[device.bdi]`: a block device starts from a built-in
//! [`DeviceProfile`] and may override single values; its bdi knobs are the
//! model's [`BdiSettings`]. Not kernel code.

use toml::Spanned;

use super::error::{ErrorKind, ScenarioError, SourceMap};
use super::keys::{
    apply_entries, check_name, entries, key_table, opt, Bandwidth, Bool, Duration, Int, Percent,
    Size,
};
use super::profiles::{builtin_profile, PROFILE_NAMES};
use super::raw::RawSection;
use super::value::as_str;
use super::DeviceConfig;
use crate::model::block::DeviceProfile;
use crate::model::mm::backing_dev::BdiSettings;

key_table! {
    /// The profile values a `[[device]]` may override.
    pub(crate) DEVICE: DeviceProfile = "[[device]]", required [] {
        write_bw: Bandwidth => |p, n| p.write_bw_bytes_per_sec = n,
            "Write bandwidth, bytes/s.";
        read_bw: Bandwidth => |p, n| p.read_bw_bytes_per_sec = n,
            "Read bandwidth, bytes/s.";
        write_lat: Duration => |p, ns| p.write_latency_ns = ns,
            "Write latency.";
        read_lat: Duration => |p, ns| p.read_latency_ns = ns,
            "Read latency.";
        queue_depth: Int(1, 65536) => |p, n| p.queue_depth = n as u32,
            "Requests in flight (tags), per hardware queue.";
        nr_hw_queues: Int(1, 4096) => |p, n| p.nr_hw_queues = n as u32,
            "Hardware queues, each with its own tags; a request uses its submitting CPU's, and the device serves the queues in turn (NVMe: one per CPU; loop, virtio-blk: 1).";
        parallelism: Int(1, 65536) => |p, n| p.parallelism = n as u32,
            "Requests served at once.";
        driver_cpu: Duration => |p, ns| p.driver_cpu_ns = ns,
            "Driver CPU time per request.";
        latency_cv: Int(0, 1000) => |p, n| p.latency_cv_pct = n as u32,
            "Service-time spread: coefficient of variation of a request's latency, percent.";
        cmd_time: Duration => |p, ns| p.cmd_ns = ns,
            "Time a command holds the controller's one command processor.";
        flush_lat: Duration => |p, ns| p.flush_latency_ns = ns,
            "Cost of a cache flush once the writes it covers are done.";
        fua_lat: Duration => |p, ns| p.fua_latency_ns = ns,
            "Extra completion latency of a FUA write.";
        stable_writes: Bool => |p, x| p.stable_writes = x,
            "The device needs stable pages during writeback (BLK_FEAT_STABLE_WRITES).";
        wbt_lat: Duration => |p, ns| p.wbt_lat_ns = ns,
            "Writeback throttling's read-latency target (wbt_lat_usec); 0 turns blk-wbt off.";
        first_write_rq: Duration => |p, ns| p.first_write_rq_ns = ns,
            "Device time of a write request that reaches never-written blocks (a sparse backing file).";
        first_write_block: Duration => |p, ns| p.first_write_block_ns = ns,
            "Device time per 4 KiB block written for the first time (a sparse backing file).";
        percpu_completion: Bool => |p, x| p.percpu_completion = x,
            "A request completes on the CPU that submitted it, where the work its completion queues on a per-CPU workqueue runs (NVMe, pmem: true; loop: false).";
        completion_cpu: Int(0, 8191) => |p, n| p.completion_cpu = Some(n as usize),
            "The CPU whose interrupt completes every request, where the device below takes its interrupts on one CPU (/proc/irq/N/effective_affinity_list); default: left open.";
    }
}

key_table! {
    /// `[device.bdi]`: the `/sys/class/bdi/*/` knobs (`mm/backing-dev.c`).
    pub(crate) BDI: BdiSettings = "[device.bdi]", required [] {
        strict_limit: Bool => |b, x| b.strict_limit = x,
            "BDI_CAP_STRICTLIMIT: throttle against this bdi's share alone.";
        max_bytes: Size(0) => |b, n| b.max_bytes = n,
            "Cap of this bdi's dirty share, bytes (0 = none).";
        min_ratio: Percent => |b, n| b.min_ratio = n as u32,
            "min_ratio, percent of the global dirty limit.";
        max_ratio: Percent => |b, n| b.max_ratio = n as u32,
            "max_ratio, percent of the global dirty limit.";
        start_dirty_ratelimit: Bandwidth => |b, n| b.start_dirty_ratelimit = n / 4096,
            "The bdi's dirty_ratelimit when the run starts (a device with a history; default: INIT_BW, 100 MiB/s).";
    }
}

/// The bdi knobs of a new device, as `bdi_init()` leaves them
/// (`mm/backing-dev.c`): no strict limit, `min_ratio = 0`, `max_ratio = 100`,
/// no `max_bytes`.
pub fn bdi_defaults() -> BdiSettings {
    BdiSettings {
        max_ratio: 100,
        ..BdiSettings::default()
    }
}

/// Keys of `[[device]]` besides the profile values.
const DEVICE_OWN_KEYS: &[&str] = &["name", "profile"];

/// One `[[device]]`.
pub(crate) fn read_device(
    src: &SourceMap,
    d: &Spanned<RawSection>,
) -> Result<DeviceConfig, ScenarioError> {
    let r = d.get_ref();
    let name_v = required_str(src, r, d, "name")?;
    let name = check_name(src, &name_v, "[[device]]")?;
    let w = format!("[[device]] '{name}'");
    let profile = required_str(src, r, d, "profile")?;
    let Some(mut params) = builtin_profile(profile.get_ref()) else {
        return Err(src.error(
            &profile.span(),
            Some("profile"),
            ErrorKind::UnknownValue,
            format!(
                "invalid 'profile' in {w}: '{}' is not a built-in profile (expected one of: {})",
                profile.get_ref(),
                PROFILE_NAMES.join(", ")
            ),
        ));
    };
    let values: Vec<_> = entries(&r.values, "")
        .into_iter()
        .filter(|e| !DEVICE_OWN_KEYS.contains(&e.key.as_str()))
        .collect();
    if let Some(e) = values.iter().find(|e| DEVICE.key(&e.key).is_none()) {
        return Err(src.error(
            &e.key_span,
            Some(&e.key),
            ErrorKind::UnknownKey,
            format!(
                "key '{}' unknown in [[device]] (expected one of: name, profile, {}, bdi)",
                e.key,
                DEVICE.names.join(", ")
            ),
        ));
    }
    if let Some((k, _)) = r.subtables.iter().find(|(k, _)| k.get_ref() != "bdi") {
        return Err(src.error(
            &k.span(),
            Some(k.get_ref()),
            ErrorKind::UnknownKey,
            format!(
                "key '{}' unknown in [[device]] (expected one of: name, profile, {}, bdi)",
                k.get_ref(),
                DEVICE.names.join(", ")
            ),
        ));
    }
    apply_entries(src, &w, &mut params, &values, |p, k, v| DEVICE.set(p, k, v))?;
    let mut bdi = bdi_defaults();
    if let Some((key, t)) = r.subtable("bdi") {
        let wb = format!("[device.bdi] of '{name}'");
        let es = entries(t, "");
        apply_entries(src, &wb, &mut bdi, &es, |b, k, v| BDI.set(b, k, v))?;
        if bdi.min_ratio > bdi.max_ratio {
            let span = es
                .iter()
                .find(|e| e.key == "min_ratio")
                .map_or(key.span(), |e| e.value_span.clone());
            return Err(src.error(
                &span,
                Some("min_ratio"),
                ErrorKind::OutOfRange,
                format!(
                    "'min_ratio' {} exceeds 'max_ratio' {} in {wb}",
                    bdi.min_ratio, bdi.max_ratio
                ),
            ));
        }
    }
    Ok(DeviceConfig {
        name,
        profile: profile.get_ref().clone(),
        params,
        bdi,
        line: src.line(d.span().start),
    })
}

/// A required string key of a [`RawSection`].
fn required_str(
    src: &SourceMap,
    r: &RawSection,
    section: &Spanned<RawSection>,
    key: &str,
) -> Result<Spanned<String>, ScenarioError> {
    let Some(v) = r.get(key) else {
        return Err(src.error(
            &section.span(),
            Some(key),
            ErrorKind::MissingKey,
            format!("missing key '{key}' in [[device]]"),
        ));
    };
    let s = opt(src, &Some(v.clone()), key, "[[device]]", |x| {
        as_str(x).map(str::to_string)
    })?
    .unwrap_or_default();
    Ok(Spanned::new(v.span(), s))
}
