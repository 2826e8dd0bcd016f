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
//!
//! Every key is read by the section's key table (`MACHINE`, `SYSCTL`,
//! `POLICIES`) into the model's [`MachineConfig`]; a variant is read once,
//! when the file is, and kept resolved.

use std::ops::Range;

use serde::Serialize;

use super::actor::key_error;
use super::error::{ErrorKind, ScenarioError};
use super::machine::{MachineConfig, MACHINE, SYSCTL};
use super::policy::POLICIES;
use super::value::KeyError;
use super::Scenario;

/// The name of the one variant of a scenario without `[variants]`.
pub const DEFAULT_VARIANT: &str = "default";

/// A `[variants.NAME]` table, read.
#[derive(Clone, Debug, PartialEq)]
pub struct VariantConfig {
    /// The name.
    pub name: String,
    /// The machine (with sysctls and policies) after its overrides, before
    /// any sweep.
    pub machine: MachineConfig,
    /// The machine at each `[sweep]` point, if the sweep applies to this
    /// variant (empty otherwise).
    pub points: Vec<MachineConfig>,
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

/// A variant ready to run: the machine the model boots.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ResolvedVariant {
    /// The variant's name.
    pub name: String,
    /// Name plus sweep point, e.g. `"ino_mod[nr_wb_ctx=4]"` (the results'
    /// `variant` field).
    pub label: String,
    /// The machine in force, with its sysctls (`machine.dirty`) and policies
    /// (`machine.policies`).
    pub machine: MachineConfig,
    /// The sweep key and value applied, if any.
    pub sweep: Option<(String, String)>,
}

/// Sets one override key (`POLICY`, `machine.KEY`, `sysctl.KEY`) through
/// its section's table.
pub(crate) fn set_override(
    m: &mut MachineConfig,
    key: &str,
    v: &toml::Value,
) -> Result<(), KeyError> {
    if let Some(k) = key.strip_prefix("machine.") {
        MACHINE.set(m, k, v)
    } else if let Some(k) = key.strip_prefix("sysctl.") {
        SYSCTL.set(&mut m.dirty, k, v)
    } else {
        POLICIES.set(&mut m.policies, key, v)
    }
}

/// Reads the sweep's values on top of each variant it applies to, once:
/// [`VariantConfig::points`].
pub(crate) fn apply_sweep(
    src: &super::error::SourceMap,
    variants: &mut [VariantConfig],
    sweep: Option<&SweepConfig>,
) -> Result<(), ScenarioError> {
    let Some(s) = sweep else {
        return Ok(());
    };
    for var in variants {
        if s.variant.as_deref().is_some_and(|n| n != var.name) {
            continue;
        }
        for (v, span) in s.values.iter().zip(&s.value_spans) {
            let mut m = var.machine.clone();
            set_override(&mut m, &s.target, v)
                .map_err(|e| key_error(src, span, "values", "[sweep]", e))?;
            var.points.push(m);
        }
    }
    Ok(())
}

/// Every key a variant or sweep may set.
pub(crate) fn override_keys() -> Vec<String> {
    let mut keys: Vec<String> = POLICIES.names.iter().map(|k| k.to_string()).collect();
    keys.extend(MACHINE.names.iter().map(|k| format!("machine.{k}")));
    keys.extend(SYSCTL.names.iter().map(|k| format!("sysctl.{k}")));
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
        let mut machine = var.machine.clone();
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
            if let Some(m) = var.points.get(i) {
                machine = m.clone();
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
                .and_then(|l| l.iter().find(|&&n| n as usize >= machine.cpus))
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
            machine,
            sweep,
        })
    }
}
