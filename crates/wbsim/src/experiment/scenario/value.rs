//! Reading typed values out of `toml::Value`s, with messages that say what
//! was expected. Not kernel code.

use super::units::{parse_bandwidth, parse_duration, parse_size};
use super::ErrorKind;

/// Why a key could not be applied.
#[derive(Clone, Debug)]
pub(crate) enum KeyError {
    /// The key does not exist; the allowed ones.
    Unknown(&'static [&'static str]),
    /// The value is wrong.
    Invalid(ErrorKind, String),
}

impl KeyError {
    pub(crate) fn invalid(msg: impl Into<String>) -> KeyError {
        KeyError::Invalid(ErrorKind::InvalidValue, msg.into())
    }
    pub(crate) fn range(msg: impl Into<String>) -> KeyError {
        KeyError::Invalid(ErrorKind::OutOfRange, msg.into())
    }
}

/// A short description of a value's TOML type, for messages.
pub(crate) fn type_name(v: &toml::Value) -> &'static str {
    match v {
        toml::Value::String(_) => "a string",
        toml::Value::Integer(_) => "an integer",
        toml::Value::Float(_) => "a float",
        toml::Value::Boolean(_) => "a boolean",
        toml::Value::Datetime(_) => "a date",
        toml::Value::Array(_) => "an array",
        toml::Value::Table(_) => "a table",
    }
}

/// A string.
pub(crate) fn as_str(v: &toml::Value) -> Result<&str, KeyError> {
    v.as_str()
        .ok_or_else(|| KeyError::invalid(format!("expected a string, found {}", type_name(v))))
}

/// A boolean (`true`/`false`).
pub(crate) fn as_bool(v: &toml::Value) -> Result<bool, KeyError> {
    v.as_bool()
        .ok_or_else(|| KeyError::invalid(format!("expected true or false, found {}", type_name(v))))
}

/// An integer in `lo..=hi`.
pub(crate) fn as_int(v: &toml::Value, lo: u64, hi: u64) -> Result<u64, KeyError> {
    let Some(i) = v.as_integer() else {
        return Err(KeyError::invalid(format!(
            "expected an integer, found {}",
            type_name(v)
        )));
    };
    match u64::try_from(i) {
        Ok(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(KeyError::range(format!(
            "{i} is out of range (allowed: {lo}..={hi})"
        ))),
    }
}

/// An integer in `lo..=hi` that fits a u32.
pub(crate) fn as_u32(v: &toml::Value, lo: u32, hi: u32) -> Result<u32, KeyError> {
    as_int(v, u64::from(lo), u64::from(hi)).map(|n| u32::try_from(n).unwrap_or(hi))
}

/// A duration string, in ns.
pub(crate) fn as_duration(v: &toml::Value) -> Result<u64, KeyError> {
    match v {
        toml::Value::String(s) => parse_duration(s).map_err(KeyError::invalid),
        _ => Err(KeyError::invalid(format!(
            "expected a duration string such as \"10s\" or \"250ms\", found {}",
            type_name(v)
        ))),
    }
}

/// A size: a string such as `"4k"` or a non-negative integer of bytes.
pub(crate) fn as_size(v: &toml::Value) -> Result<u64, KeyError> {
    match v {
        toml::Value::String(s) => parse_size(s).map_err(KeyError::invalid),
        toml::Value::Integer(i) => u64::try_from(*i)
            .map_err(|_| KeyError::range(format!("a size cannot be negative ({i})"))),
        _ => Err(KeyError::invalid(format!(
            "expected a size such as \"4k\" or \"24g\" (or an integer of bytes), found {}",
            type_name(v)
        ))),
    }
}

/// A bandwidth in bytes/s: `"2g/s"`, `"2g"` or an integer.
pub(crate) fn as_bandwidth(v: &toml::Value) -> Result<u64, KeyError> {
    match v {
        toml::Value::String(s) => parse_bandwidth(s).map_err(KeyError::invalid),
        _ => as_size(v),
    }
}

/// One of `names` (the enum's spellings).
pub(crate) fn as_choice<T: Copy>(v: &toml::Value, table: &[(&str, T)]) -> Result<T, KeyError> {
    let list = table.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ");
    let s = v.as_str().ok_or_else(|| {
        KeyError::invalid(format!(
            "expected a string (one of: {list}), found {}",
            type_name(v)
        ))
    })?;
    table
        .iter()
        .find(|(n, _)| *n == s)
        .map(|(_, t)| *t)
        .ok_or_else(|| {
            KeyError::Invalid(
                ErrorKind::UnknownValue,
                format!("'{s}' is not allowed (expected one of: {list})"),
            )
        })
}
