//! The scenario file as deserialized, before validation: every value keeps
//! its span so later errors can name the line. Not kernel code.
//!
//! `deny_unknown_fields` everywhere: the `toml` crate then reports an unknown
//! key with its span and the expected keys, which `SourceMap::from_toml`
//! rewrites. Tables whose keys depend on context (`[machine]`, `[sysctl]`,
//! variants, filesystem options, actor steps) are kept as spanned maps and
//! checked key by key.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

/// A table kept with the span of every key and value.
pub(crate) type SpannedTable = BTreeMap<Spanned<String>, Spanned<toml::Value>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawScenarioFile {
    pub scenario: Option<Spanned<RawHeader>>,
    pub machine: Option<Spanned<SpannedTable>>,
    pub sysctl: Option<SpannedTable>,
    #[serde(default)]
    pub device: Vec<Spanned<RawDevice>>,
    #[serde(default)]
    pub filesystem: Vec<Spanned<RawFilesystem>>,
    #[serde(default)]
    pub cgroup: Vec<Spanned<RawCgroup>>,
    #[serde(default)]
    pub job: Vec<Spanned<RawJob>>,
    #[serde(default)]
    pub actor: Vec<Spanned<RawActor>>,
    pub variants: Option<BTreeMap<Spanned<String>, Spanned<RawVariant>>>,
    pub measure: Option<Spanned<RawMeasure>>,
    pub sweep: Option<Spanned<RawSweep>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHeader {
    pub name: Spanned<String>,
    pub description: Option<Spanned<String>>,
    pub duration: Spanned<toml::Value>,
    pub repeat: Option<Spanned<toml::Value>>,
    pub seed: Option<Spanned<toml::Value>>,
    pub quick_duration: Option<Spanned<toml::Value>>,
    pub quick_repeat: Option<Spanned<toml::Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDevice {
    pub name: Spanned<String>,
    pub profile: Spanned<String>,
    pub write_bw: Option<Spanned<toml::Value>>,
    pub read_bw: Option<Spanned<toml::Value>>,
    pub write_lat: Option<Spanned<toml::Value>>,
    pub read_lat: Option<Spanned<toml::Value>>,
    pub queue_depth: Option<Spanned<toml::Value>>,
    pub parallelism: Option<Spanned<toml::Value>>,
    pub driver_cpu: Option<Spanned<toml::Value>>,
    pub bdi: Option<Spanned<RawBdi>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawBdi {
    pub strict_limit: Option<Spanned<toml::Value>>,
    pub max_bytes: Option<Spanned<toml::Value>>,
    pub min_ratio: Option<Spanned<toml::Value>>,
    pub max_ratio: Option<Spanned<toml::Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFilesystem {
    pub name: Spanned<String>,
    #[serde(rename = "type")]
    pub fs_type: Spanned<String>,
    pub device: Option<Spanned<String>>,
    pub mountpoint: Option<Spanned<String>>,
    pub options: Option<SpannedTable>,
    pub mounted: Option<Spanned<toml::Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCgroup {
    pub name: Spanned<String>,
    pub memory_high: Option<Spanned<toml::Value>>,
    pub memory_max: Option<Spanned<toml::Value>>,
    pub cpus: Option<Spanned<toml::Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawJob {
    pub file: Option<Spanned<String>>,
    pub fio: Option<Spanned<String>>,
    pub filesystem: Option<Spanned<String>>,
    pub cgroup: Option<Spanned<String>>,
    pub start: Option<Spanned<toml::Value>>,
    pub only_variants: Option<Vec<Spanned<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawActor {
    pub name: Spanned<String>,
    pub cgroup: Option<Spanned<String>>,
    pub start: Option<Spanned<toml::Value>>,
    pub repeat: Option<Spanned<toml::Value>>,
    pub instances: Option<Spanned<toml::Value>>,
    pub steps: Spanned<Vec<Spanned<SpannedTable>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMeasure {
    pub sample_interval: Option<Spanned<toml::Value>>,
    pub metrics: Option<Vec<Spanned<String>>>,
    pub warmup: Option<Spanned<toml::Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSweep {
    pub key: Spanned<String>,
    pub values: Spanned<Vec<Spanned<toml::Value>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawVariant {
    pub umount_drain: Option<Spanned<toml::Value>>,
    pub csum_lookup: Option<Spanned<toml::Value>>,
    pub detach_release: Option<Spanned<toml::Value>>,
    pub wb_ctx_assign: Option<Spanned<toml::Value>>,
    pub nr_wb_ctx: Option<Spanned<toml::Value>>,
    pub dontcache_flush: Option<Spanned<toml::Value>>,
    pub machine: Option<SpannedTable>,
    pub sysctl: Option<SpannedTable>,
}
