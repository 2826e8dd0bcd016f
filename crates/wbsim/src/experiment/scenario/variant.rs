//! Variants and sweeps: which policies, sysctls and machine keys differ
//! between the runs of one scenario.
//!
//! Not kernel code. A variant is `[variants.NAME]` with policy keys
//! ([`Policies::KEYS`]) and `machine.KEY` / `sysctl.KEY` overrides, applied
//! in file order on top of `[machine]`, `[sysctl]` and the pre-change
//! policies. A `[sweep]` then sets one key to each of its values in turn, in
//! every variant (`"nr_wb_ctx"`, `"variants.*.nr_wb_ctx"`) or in one
//! (`"variants.NAME.KEY"`). Sysctl overrides behave like writes to
//! `/proc/sys/vm`: setting `dirty_bytes` zeroes `dirty_ratio`.

use std::ops::Range;

use serde::Serialize;

use super::actor::key_error;
use super::error::{ErrorKind, ScenarioError};
use super::machine::{MachineConfig, Sysctl};
use super::policy::Policies;
use super::value::KeyError;
use super::Scenario;

/// The name of the one variant of a scenario without `[variants]`.
pub const DEFAULT_VARIANT: &str = "default";

/// One key a variant sets.
#[derive(Clone, Debug, PartialEq)]
pub struct Override {
    /// `"umount_drain"`, `"machine.cpus"`, `"sysctl.dirty_ratio"`...
    pub key: String,
    /// The value as written.
    pub value: toml::Value,
    /// Line of the key.
    pub line: u32,
    /// Byte span of the value, for errors.
    pub(crate) span: Range<usize>,
}

/// A `[variants.NAME]` table.
#[derive(Clone, Debug, PartialEq)]
pub struct VariantConfig {
    /// The name.
    pub name: String,
    /// What it sets, in file order.
    pub overrides: Vec<Override>,
    /// Line of the table header (0 for the implicit default).
    pub line: u32,
}

/// `[sweep]`.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepConfig {
    /// The key as written (`"variants.*.nr_wb_ctx"`).
    pub key: String,
    /// The one variant it applies to (None = all).
    pub variant: Option<String>,
    /// The key set: a policy key, `machine.KEY` or `sysctl.KEY`.
    pub target: String,
    /// The values, in order.
    pub values: Vec<toml::Value>,
    /// Line of `key`.
    pub line: u32,
    /// Spans of the values, for errors.
    pub(crate) value_spans: Vec<Range<usize>>,
}

/// A variant ready to run: everything the model needs that variants change.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ResolvedVariant {
    /// The variant's name.
    pub name: String,
    /// Name plus sweep point, e.g. `"ino_mod[nr_wb_ctx=4]"` (the results'
    /// `variant` field).
    pub label: String,
    /// The policies in force.
    pub policies: Policies,
    /// The machine in force.
    pub machine: MachineConfig,
    /// The sysctls in force.
    pub sysctl: Sysctl,
    /// The sweep key and value applied, if any.
    pub sweep: Option<(String, String)>,
}

/// Applies one override key (`policy`, `machine.KEY`, `sysctl.KEY`).
pub(crate) fn apply(
    target: &str,
    v: &toml::Value,
    p: &mut Policies,
    m: &mut MachineConfig,
    s: &mut Sysctl,
) -> Result<(), KeyError> {
    if let Some(k) = target.strip_prefix("machine.") {
        m.set(k, v)
    } else if let Some(k) = target.strip_prefix("sysctl.") {
        s.set(k, v)
    } else {
        p.set(target, v)
    }
}

/// Every key a variant or sweep may set.
pub(crate) fn override_keys() -> Vec<String> {
    let mut keys: Vec<String> = Policies::KEYS.iter().map(|k| k.to_string()).collect();
    keys.extend(MachineConfig::KEYS.iter().map(|k| format!("machine.{k}")));
    keys.extend(Sysctl::KEYS.iter().map(|k| format!("sysctl.{k}")));
    keys
}

/// Displays a sweep value compactly (`4`, `global`, `10s`).
pub(crate) fn value_label(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl Scenario {
    /// The variant `name` with its overrides applied (no sweep point).
    pub fn variant(&self, name: &str) -> Result<ResolvedVariant, ScenarioError> {
        self.resolve(name, None)
    }

    /// The sweep points to run: `[None]` without a sweep, else
    /// `[Some(0), .., Some(n - 1)]`.
    pub fn sweep_points(&self) -> Vec<Option<usize>> {
        match &self.sweep {
            None => vec![None],
            Some(s) => (0..s.values.len()).map(Some).collect(),
        }
    }

    /// The variant `name` at sweep point `point` (an index into
    /// `[sweep] values`; ignored for variants the sweep does not apply to).
    pub fn resolve(
        &self,
        name: &str,
        point: Option<usize>,
    ) -> Result<ResolvedVariant, ScenarioError> {
        let src = &self.source;
        let Some(var) = self.variants.iter().find(|v| v.name == name) else {
            return Err(src.file_error(
                ErrorKind::UnknownReference,
                format!(
                    "no variant '{name}' (variants: {})",
                    self.variant_names().join(", ")
                ),
            ));
        };
        let where_ = format!("[variants.{name}]");
        let mut policies = Policies::default();
        let mut machine = self.machine.clone();
        let mut sysctl = self.sysctl.clone();
        for o in &var.overrides {
            apply(&o.key, &o.value, &mut policies, &mut machine, &mut sysctl)
                .map_err(|e| key_error(src, &o.span, &o.key, &where_, e))?;
        }
        let mut label = name.to_string();
        let mut sweep = None;
        if let (Some(i), Some(s)) = (point, &self.sweep) {
            let Some(v) = s.values.get(i) else {
                return Err(src.file_error(
                    ErrorKind::OutOfRange,
                    format!(
                        "sweep point {i} does not exist ([sweep] has {} values)",
                        s.values.len()
                    ),
                ));
            };
            if s.variant.as_deref().is_none_or(|n| n == name) {
                let span = s.value_spans.get(i).cloned().unwrap_or(0..0);
                apply(&s.target, v, &mut policies, &mut machine, &mut sysctl)
                    .map_err(|e| key_error(src, &span, "values", "[sweep]", e))?;
                let shown = value_label(v);
                label = format!("{name}[{}={shown}]", s.target);
                sweep = Some((s.target.clone(), shown));
            }
        }
        // Cross-checks that overrides can break.
        for c in &self.cgroups {
            if let Some(&cpu) = c
                .cpus
                .as_ref()
                .and_then(|l| l.iter().find(|&&n| n >= machine.cpus))
            {
                return Err(ScenarioError {
                    origin: src.origin().to_string(),
                    line: c.line,
                    col: None,
                    key: Some("cpus".to_string()),
                    kind: ErrorKind::OutOfRange,
                    message: format!(
                        "cgroup '{}': CPU {cpu} is out of range in variant '{label}': machine.cpus = {} (CPUs 0..={})",
                        c.name,
                        machine.cpus,
                        machine.cpus.saturating_sub(1)
                    ),
                });
            }
        }
        Ok(ResolvedVariant {
            name: name.to_string(),
            label,
            policies,
            machine,
            sysctl,
            sweep,
        })
    }
}
