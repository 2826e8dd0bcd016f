//! Scenario errors: every one names the file, the line (and column when
//! known) and the key, as `file:line:col: message`.
//!
//! Not kernel code. Spans come from the `toml` crate (`toml::Spanned`, and the
//! span of a `toml::de::Error`); [`SourceMap`] turns byte offsets into
//! 1-based line and column numbers.

use std::fmt;
use std::ops::Range;

/// What went wrong, for callers and tests that branch on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The file could not be read.
    Io,
    /// Not valid TOML.
    Syntax,
    /// A key the section does not have.
    UnknownKey,
    /// A required key (or section) is missing.
    MissingKey,
    /// A value of the wrong type or form (bad duration, bad size...).
    InvalidValue,
    /// An enumerated value not among the allowed ones.
    UnknownValue,
    /// A name that refers to nothing (device, filesystem, cgroup, variant).
    UnknownReference,
    /// A number outside its allowed range.
    OutOfRange,
    /// Two things with the same name, or two keys that exclude each other.
    Conflict,
}

/// An error in a scenario file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    /// The file (path as given, or the origin passed to `parse_str`).
    pub origin: String,
    /// 1-based line; 0 when the error concerns no particular line.
    pub line: u32,
    /// 1-based column (in characters) when known.
    pub col: Option<u32>,
    /// The key concerned, dotted (`"filesystem.device"`), when there is one.
    pub key: Option<String>,
    /// The kind of error.
    pub kind: ErrorKind,
    /// The message, without the location prefix.
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.col) {
            (0, _) => write!(f, "{}: {}", self.origin, self.message),
            (l, Some(c)) => write!(f, "{}:{l}:{c}: {}", self.origin, self.message),
            (l, None) => write!(f, "{}:{l}: {}", self.origin, self.message),
        }
    }
}

impl std::error::Error for ScenarioError {}

/// Maps byte offsets in the scenario text to lines and columns.
#[derive(Clone, Debug)]
pub struct SourceMap {
    origin: String,
    text: String,
    /// Byte offset of the start of each line.
    line_starts: Vec<usize>,
}

impl SourceMap {
    /// Indexes `text`, read from `origin`.
    pub fn new(origin: &str, text: &str) -> SourceMap {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        SourceMap {
            origin: origin.to_string(),
            text: text.to_string(),
            line_starts,
        }
    }

    /// The origin (file name) errors name.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The whole text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// 1-based (line, column) of a byte offset; the column counts characters.
    pub fn line_col(&self, offset: usize) -> (u32, u32) {
        let offset = offset.min(self.text.len());
        let idx = self
            .line_starts
            .partition_point(|&s| s <= offset)
            .saturating_sub(1);
        let start = self.line_starts[idx];
        let col = self
            .text
            .get(start..offset)
            .map_or(0, |s| s.chars().count());
        (to_u32(idx + 1), to_u32(col + 1))
    }

    /// 1-based line of a byte offset.
    pub fn line(&self, offset: usize) -> u32 {
        self.line_col(offset).0
    }

    /// The error at `span`.
    pub fn error(
        &self,
        span: &Range<usize>,
        key: Option<&str>,
        kind: ErrorKind,
        message: impl Into<String>,
    ) -> ScenarioError {
        let (line, col) = self.line_col(span.start);
        ScenarioError {
            origin: self.origin.clone(),
            line,
            col: Some(col),
            key: key.map(str::to_string),
            kind,
            message: message.into(),
        }
    }

    /// An error that concerns the whole file.
    pub fn file_error(&self, kind: ErrorKind, message: impl Into<String>) -> ScenarioError {
        ScenarioError {
            origin: self.origin.clone(),
            line: 0,
            col: None,
            key: None,
            kind,
            message: message.into(),
        }
    }

    /// The table header (`[machine]`, `[[filesystem]]`, `[variants.x]`) in
    /// force at `offset`, or `"the top level"`.
    pub fn section_at(&self, offset: usize) -> String {
        let line = self.line(offset) as usize;
        for l in (0..line).rev() {
            let start = self.line_starts[l];
            let end = self
                .line_starts
                .get(l + 1)
                .copied()
                .unwrap_or(self.text.len());
            let s = self.text[start..end].trim();
            if s.starts_with('[') {
                // Cut a trailing comment after the header.
                let close = if s.starts_with("[[") {
                    s.find("]]").map(|i| i + 2)
                } else {
                    s.find(']').map(|i| i + 1)
                };
                return s[..close.unwrap_or(s.len())].to_string();
            }
        }
        "the top level".to_string()
    }

    /// Converts an error from the `toml` crate (syntax errors, and serde
    /// errors: unknown field, missing field, wrong type) into a located one.
    pub fn from_toml(&self, err: &toml::de::Error) -> ScenarioError {
        let span = err.span().unwrap_or(0..0);
        let msg = err.message().trim().to_string();
        let section = self.section_at(span.start);
        let quoted = |s: &str| s.split('`').nth(1).map(str::to_string);
        if let Some(rest) = msg.strip_prefix("unknown field `") {
            let key = rest.split('`').next().unwrap_or("").to_string();
            let expected: Vec<&str> = rest
                .split('`')
                .skip(1)
                .collect::<Vec<_>>()
                .chunks(2)
                .filter_map(|c| c.get(1).copied())
                .collect();
            let list = if expected.is_empty() {
                "no keys".to_string()
            } else {
                expected.join(", ")
            };
            return self.error(
                &span,
                Some(&key),
                ErrorKind::UnknownKey,
                format!("key '{key}' unknown in {section} (expected one of: {list})"),
            );
        }
        if msg.starts_with("missing field `") {
            let key = quoted(&msg).unwrap_or_default();
            return self.error(
                &span,
                Some(&key),
                ErrorKind::MissingKey,
                format!("missing key '{key}' in {section}"),
            );
        }
        if msg.starts_with("duplicate key `") {
            let key = quoted(&msg).unwrap_or_default();
            return self.error(
                &span,
                Some(&key),
                ErrorKind::Conflict,
                format!("key '{key}' set twice in {section}"),
            );
        }
        if msg.starts_with("invalid type")
            || msg.starts_with("invalid value")
            || msg.starts_with("invalid length")
        {
            let key = self.key_at(span.start);
            let what = key
                .as_deref()
                .map_or(String::new(), |k| format!(" for '{k}'"));
            return self.error(
                &span,
                key.as_deref(),
                ErrorKind::InvalidValue,
                format!("{msg}{what} in {section}"),
            );
        }
        self.error(
            &span,
            None,
            ErrorKind::Syntax,
            format!("{msg} (in {section})"),
        )
    }

    /// The key assigned on the line holding `offset` (`key = value`), if any.
    fn key_at(&self, offset: usize) -> Option<String> {
        let line = self.line(offset) as usize;
        let start = self.line_starts[line - 1];
        let before = self.text.get(start..offset.min(self.text.len()))?;
        let eq = before.rfind('=')?;
        let key = before[..eq]
            .trim()
            .rsplit([',', '{', ' '])
            .next()?
            .trim()
            .trim_matches('"');
        (!key.is_empty()).then(|| key.to_string())
    }

    /// The span of `key` as written inside `within` (an inline table), for
    /// pointing at a key of a table kept as a value.
    pub fn find_key(&self, within: &Range<usize>, key: &str) -> Range<usize> {
        let hay = self.text.get(within.clone()).unwrap_or("");
        let mut from = 0;
        while let Some(i) = hay[from..].find(key) {
            let at = from + i;
            let prev_ok = hay[..at]
                .chars()
                .next_back()
                .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
            let after = hay[at + key.len()..].trim_start();
            if prev_ok && after.starts_with('=') {
                return within.start + at..within.start + at + key.len();
            }
            from = at + key.len();
        }
        within.clone()
    }
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}
