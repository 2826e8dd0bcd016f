//! The scenario file as deserialized, before validation: every value keeps
//! its span so later errors can name the line. Not kernel code.
//!
//! `deny_unknown_fields` everywhere: the `toml` crate then reports an unknown
//! key with its span and the expected keys, which `SourceMap::from_toml`
//! rewrites. Tables read by a key table (`[machine]`, `[sysctl]`,
//! `[[device]]`, variants) and those whose keys depend on context
//! (filesystem options, actor steps) are kept as spanned maps and checked key
//! by key.

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
    pub device: Vec<Spanned<RawSection>>,
    #[serde(default)]
    pub filesystem: Vec<Spanned<RawFilesystem>>,
    #[serde(default)]
    pub cgroup: Vec<Spanned<RawCgroup>>,
    #[serde(default)]
    pub job: Vec<Spanned<RawJob>>,
    #[serde(default)]
    pub actor: Vec<Spanned<RawActor>>,
    pub variants: Option<BTreeMap<Spanned<String>, Spanned<RawSection>>>,
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
    pub per_job: Option<Spanned<toml::Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSweep {
    pub key: Spanned<String>,
    pub values: Spanned<Vec<Spanned<toml::Value>>>,
}

/// A table whose keys the section's key table checks (`[[device]]`,
/// `[variants.NAME]`): every value kept with its span, and the sub-tables
/// named in [`SUBTABLES`] (`[device.bdi]`, a variant's `machine.KEY` and
/// `sysctl.KEY`) kept with the spans of their own keys.
#[derive(Default)]
pub(crate) struct RawSection {
    pub values: SpannedTable,
    pub subtables: BTreeMap<Spanned<String>, SpannedTable>,
}

/// Keys of a [`RawSection`] that hold a table of located keys.
pub(crate) const SUBTABLES: &[&str] = &["bdi", "machine", "sysctl"];

impl<'de> Deserialize<'de> for RawSection {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RawSection;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a table")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<RawSection, A::Error> {
                let mut s = RawSection::default();
                while let Some(k) = map.next_key::<Spanned<String>>()? {
                    if SUBTABLES.contains(&k.get_ref().as_str()) {
                        let t: SpannedTable = map.next_value()?;
                        s.subtables.insert(k, t);
                    } else {
                        let v: Spanned<toml::Value> = map.next_value()?;
                        s.values.insert(k, v);
                    }
                }
                Ok(s)
            }
        }
        d.deserialize_map(V)
    }
}

impl RawSection {
    /// The value of `key`, if set.
    pub(crate) fn get(&self, key: &str) -> Option<&Spanned<toml::Value>> {
        self.values
            .iter()
            .find(|(k, _)| k.get_ref() == key)
            .map(|(_, v)| v)
    }

    /// The sub-table `key` with the span of its key, if set.
    pub(crate) fn subtable(&self, key: &str) -> Option<(&Spanned<String>, &SpannedTable)> {
        self.subtables.iter().find(|(k, _)| k.get_ref() == key)
    }
}
