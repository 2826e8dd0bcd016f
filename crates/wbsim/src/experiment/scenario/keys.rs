//! The generic reader of located TOML keys: value units with their ranges,
//! and one key table per section. Not kernel code.
//!
//! A section that sets a model type (`[machine]` and `[sysctl]` set
//! [`crate::model::init::MachineConfig`], `[[device]]` the
//! [`crate::model::block::DeviceProfile`], `[device.bdi]` the
//! [`crate::model::mm::backing_dev::BdiSettings`], variants the
//! [`crate::model::policy::Policies`]) declares its keys once, with
//! [`key_table!`]: key, unit (parser and range), what it sets, doc. From that
//! one table come the setter, the known-keys list of "unknown key" errors and
//! the documentation; the same table reads the section, a variant's
//! `machine.KEY` / `sysctl.KEY` override and a sweep value. Defaults are the
//! model type's own (its constructor or `Default`), so each has one home.

use std::ops::Range;

use super::actor::key_error;
use toml::Spanned;

use super::error::{ErrorKind, ScenarioError, SourceMap};
use super::units::format_size;
use super::value::{as_bandwidth, as_bool, as_choice, as_duration, as_int, as_size, KeyError};

/// A unit: how a TOML value is read and which values are allowed.
pub(crate) trait Unit {
    /// The value read.
    type Out;
    /// Reads `v`.
    fn parse(&self, v: &toml::Value) -> Result<Self::Out, KeyError>;
}

/// `true` / `false`.
pub(crate) struct Bool;

impl Unit for Bool {
    type Out = bool;
    fn parse(&self, v: &toml::Value) -> Result<bool, KeyError> {
        as_bool(v)
    }
}

/// An integer in `lo..=hi`.
pub(crate) struct Int(pub u64, pub u64);

impl Unit for Int {
    type Out = u64;
    fn parse(&self, v: &toml::Value) -> Result<u64, KeyError> {
        as_int(v, self.0, self.1)
    }
}

/// A percentage, `0..=100`.
pub(crate) struct Percent;

impl Unit for Percent {
    type Out = u64;
    fn parse(&self, v: &toml::Value) -> Result<u64, KeyError> {
        as_int(v, 0, 100)
    }
}

/// An integer that must be one of a list (Kconfig choices such as `HZ_*`).
pub(crate) struct OneOf(pub &'static [u64]);

impl Unit for OneOf {
    type Out = u64;
    fn parse(&self, v: &toml::Value) -> Result<u64, KeyError> {
        let hi = self.0.iter().copied().max().unwrap_or(0);
        let n = as_int(v, 1, hi)?;
        if self.0.contains(&n) {
            return Ok(n);
        }
        let list: Vec<String> = self.0.iter().map(u64::to_string).collect();
        Err(KeyError::range(format!(
            "{n} is not allowed (expected one of: {})",
            list.join(", ")
        )))
    }
}

/// A size (`"4k"`, `"24g"` or bytes), at least `min` bytes.
pub(crate) struct Size(pub u64);

impl Unit for Size {
    type Out = u64;
    fn parse(&self, v: &toml::Value) -> Result<u64, KeyError> {
        let b = as_size(v)?;
        if b < self.0 {
            return Err(KeyError::range(format!(
                "{b} bytes is below the minimum of {}",
                format_size(self.0)
            )));
        }
        Ok(b)
    }
}

/// A duration string (`"10s"`, `"250ms"`), ns.
pub(crate) struct Duration;

impl Unit for Duration {
    type Out = u64;
    fn parse(&self, v: &toml::Value) -> Result<u64, KeyError> {
        as_duration(v)
    }
}

/// A bandwidth (`"2g/s"`, `"2g"` or bytes/s), greater than 0.
pub(crate) struct Bandwidth;

impl Unit for Bandwidth {
    type Out = u64;
    fn parse(&self, v: &toml::Value) -> Result<u64, KeyError> {
        let n = as_bandwidth(v)?;
        if n == 0 {
            return Err(KeyError::range("must be greater than 0"));
        }
        Ok(n)
    }
}

/// One of an enumeration's spellings (`policy_enum!`'s `ALL`).
pub(crate) struct Choice<T: 'static>(pub &'static [(&'static str, T)]);

impl<T: Copy> Unit for Choice<T> {
    type Out = T;
    fn parse(&self, v: &toml::Value) -> Result<T, KeyError> {
        as_choice(v, self.0)
    }
}

/// One key of a section.
pub(crate) struct Key<T: 'static> {
    /// The key as written.
    pub name: &'static str,
    /// The unit and range, as declared.
    pub unit: &'static str,
    /// What it sets.
    pub doc: &'static str,
    /// Reads the value and sets it.
    pub set: fn(&mut T, &toml::Value) -> Result<(), KeyError>,
}

/// The keys of one section.
pub(crate) struct Table<T: 'static> {
    /// `"[machine]"`...
    pub section: &'static str,
    /// Every key, in documentation order.
    pub keys: &'static [Key<T>],
    /// Their names (for "unknown key" errors).
    pub names: &'static [&'static str],
    /// Keys without a default.
    pub required: &'static [&'static str],
}

/// One key of a section, as documented by its table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyDoc {
    /// `"[machine]"`...
    pub section: &'static str,
    /// The key.
    pub key: &'static str,
    /// Unit and range, as declared (`"Int(1, CPUS_MAX)"`, `"Percent"`).
    pub unit: &'static str,
    /// What it sets.
    pub doc: &'static str,
}

impl<T> Table<T> {
    /// The documentation of every key.
    pub(crate) fn docs(&self) -> impl Iterator<Item = KeyDoc> + '_ {
        self.keys.iter().map(|k| KeyDoc {
            section: self.section,
            key: k.name,
            unit: k.unit,
            doc: k.doc,
        })
    }

    /// The key `name`.
    pub(crate) fn key(&self, name: &str) -> Option<&'static Key<T>> {
        self.keys.iter().find(|k| k.name == name)
    }

    /// Sets `name` to `v` in `obj`.
    pub(crate) fn set(&self, obj: &mut T, name: &str, v: &toml::Value) -> Result<(), KeyError> {
        match self.key(name) {
            Some(k) => (k.set)(obj, v),
            None => Err(KeyError::Unknown(self.names)),
        }
    }
}

/// Declares a section's key table: `NAME: Type = "[section]", required [..] {
/// key: Unit => |obj, value| what it sets, "doc"; ... }`. `value` is what the
/// unit read; the body may use `?` on a `KeyError`.
macro_rules! key_table {
    (
        $(#[$m:meta])*
        $vis:vis $table:ident : $ty:ty = $section:literal, required [$($req:literal),*] {
            $( $key:ident : $unit:expr => |$o:ident, $v:ident| $body:expr , $doc:literal ; )+
        }
    ) => {
        $(#[$m])*
        $vis const $table: $crate::experiment::scenario::keys::Table<$ty> =
            $crate::experiment::scenario::keys::Table {
                section: $section,
                keys: &[$(
                    $crate::experiment::scenario::keys::Key {
                        name: stringify!($key),
                        unit: stringify!($unit),
                        doc: $doc,
                        set: {
                            #[allow(unused_variables, clippy::unnecessary_cast)]
                            fn set(
                                $o: &mut $ty,
                                v: &toml::Value,
                            ) -> Result<(), $crate::experiment::scenario::value::KeyError> {
                                let $v = $crate::experiment::scenario::keys::Unit::parse(&$unit, v)?;
                                $body;
                                Ok(())
                            }
                            set
                        },
                    }
                ),+],
                names: &[$(stringify!($key)),+],
                required: &[$($req),*],
            };
    };
}
pub(crate) use key_table;

/// One key = value of a table as written: the key (possibly prefixed, as in
/// `sysctl.dirty_ratio`), its value, and their spans.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Entry {
    pub key: String,
    pub value: toml::Value,
    pub key_span: Range<usize>,
    pub value_span: Range<usize>,
}

/// Whether writing `v` resets rather than sets (0, `"0"`, false): such a
/// write never conflicts with a later one (0 means "unset" for the sysctl
/// pairs).
fn is_reset(v: &toml::Value) -> bool {
    match v {
        toml::Value::Boolean(b) => !b,
        toml::Value::Integer(i) => *i == 0,
        toml::Value::String(s) => super::units::parse_size(s).is_ok_and(|b| b == 0),
        _ => false,
    }
}

/// Applies `entries` (in file order) to `obj`, each through `set`, locating
/// errors at the value (or at the key, if it is unknown). A later key that
/// undoes what an earlier non-zero one of the same table wrote (`dirty_bytes`
/// after `dirty_ratio`: the model's handler zeroes the ratio) is an error:
/// the result would depend on the order of the lines.
pub(crate) fn apply_entries<T: Clone + PartialEq>(
    src: &SourceMap,
    where_: &str,
    obj: &mut T,
    entries: &[Entry],
    set: impl Fn(&mut T, &str, &toml::Value) -> Result<(), KeyError>,
) -> Result<(), ScenarioError> {
    for (i, e) in entries.iter().enumerate() {
        set(obj, &e.key, &e.value).map_err(|err| match err {
            KeyError::Unknown(_) => key_error(src, &e.key_span, &e.key, where_, err),
            _ => key_error(src, &e.value_span, &e.key, where_, err),
        })?;
        for earlier in &entries[..i] {
            if is_reset(&earlier.value) || is_reset(&e.value) || earlier.key == e.key {
                continue;
            }
            let mut probe = obj.clone();
            if set(&mut probe, &earlier.key, &earlier.value).is_ok() && probe != *obj {
                return Err(src.error(
                    &e.key_span,
                    Some(&e.key),
                    ErrorKind::Conflict,
                    format!(
                        "'{}' and '{}' (line {}) are both set in {where_}; set only one (the kernel zeroes the other)",
                        e.key,
                        earlier.key,
                        src.line(earlier.key_span.start)
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The entries of a spanned table in file order, keys prefixed by `prefix`.
pub(crate) fn entries(table: &super::raw::SpannedTable, prefix: &str) -> Vec<Entry> {
    let mut out: Vec<Entry> = table
        .iter()
        .map(|(k, v)| Entry {
            key: format!("{prefix}{}", k.get_ref()),
            value: v.get_ref().clone(),
            key_span: k.span(),
            value_span: v.span(),
        })
        .collect();
    out.sort_by_key(|e| e.key_span.start);
    out
}

/// Applies a section's table to `obj` and checks its required keys;
/// `header` is the span of the section (for a missing key).
pub(crate) fn read_section<T: Clone + PartialEq>(
    src: &SourceMap,
    table: &Table<T>,
    where_: &str,
    obj: &mut T,
    raw: &super::raw::SpannedTable,
    header: &Range<usize>,
) -> Result<(), ScenarioError> {
    apply_entries(src, where_, obj, &entries(raw, ""), |o, k, v| {
        table.set(o, k, v)
    })?;
    for req in table.required {
        if !raw.keys().any(|k| k.get_ref() == req) {
            return Err(src.error(
                header,
                Some(req),
                ErrorKind::MissingKey,
                format!("missing key '{req}' in {where_}"),
            ));
        }
    }
    Ok(())
}

/// Reads an optional spanned value with `f`, locating errors at the value.
pub(crate) fn opt<T>(
    src: &SourceMap,
    v: &Option<Spanned<toml::Value>>,
    key: &str,
    where_: &str,
    f: impl Fn(&toml::Value) -> Result<T, KeyError>,
) -> Result<Option<T>, ScenarioError> {
    match v {
        Some(v) => f(v.get_ref())
            .map(Some)
            .map_err(|e| key_error(src, &v.span(), key, where_, e)),
        None => Ok(None),
    }
}

/// A name: non-empty, letters, digits, `_`, `-`, `.`.
pub(crate) fn check_name(
    src: &SourceMap,
    name: &Spanned<String>,
    where_: &str,
) -> Result<String, ScenarioError> {
    let n = name.get_ref();
    if n.is_empty()
        || !n
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    {
        return Err(src.error(
            &name.span(),
            Some("name"),
            ErrorKind::InvalidValue,
            format!("invalid name \"{n}\" in {where_}: use letters, digits, '_', '-', '.'"),
        ));
    }
    Ok(n.clone())
}

#[cfg(test)]
mod tests {
    use crate::model::init::MachineConfig;

    #[test]
    fn sysctl_table_uses_the_model_handlers() {
        let mut m = MachineConfig::new(1, 1 << 30);
        let bytes = toml::Value::String("100m".to_string());
        super::super::machine::SYSCTL
            .set(&mut m.dirty, "dirty_bytes", &bytes)
            .unwrap_or_else(|_| panic!("dirty_bytes"));
        assert_eq!((m.dirty.dirty_bytes, m.dirty.dirty_ratio), (100 << 20, 0));
        let small = toml::Value::Integer(4096);
        assert!(super::super::machine::SYSCTL
            .set(&mut m.dirty, "dirty_bytes", &small)
            .is_err());
    }
}
