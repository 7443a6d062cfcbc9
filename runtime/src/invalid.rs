//! [`Invalid`]: what `GpuError::InvalidArgument` carries — the explanation as shown, and,
//! where the runtime knows them, which of the caller's arguments is at fault and what the
//! operation expected against what it got, so code can act on a bad request without
//! parsing text.

use std::fmt;

/// A bad request: which argument, expected vs got (when the mistake is a mismatch), and
/// the whole explanation. Reads as its message (`Display`, `Deref<Target = str>`), so
/// `e.contains("…")` and `format!("{e}")` work as on a string.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Invalid {
    /// The parameter at fault as the caller named it (`"y"`, `"lda"`), when known.
    pub arg: Option<String>,
    /// What the operation needed (`"1000 elements"`), for a mismatch.
    pub expected: Option<String>,
    /// What it was given (`"999 elements"`), for a mismatch.
    pub got: Option<String>,
    /// The explanation, with how to fix it.
    pub message: String,
}

impl Invalid {
    /// A bad request explained in words only.
    pub fn new(message: impl Into<String>) -> Self {
        Invalid {
            arg: None,
            expected: None,
            got: None,
            message: message.into(),
        }
    }

    /// Names the argument at fault.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.arg = Some(arg.into());
        self
    }

    /// A buffer of the wrong length: argument `arg` holds `got` elements where the
    /// operation needs exactly `expected` — the commonest bad request, written once.
    pub fn length(message: impl Into<String>, arg: &str, expected: usize, got: usize) -> Self {
        Invalid::new(message)
            .arg(arg)
            .mismatch(format_args!("{expected} elements"), format_args!("{got} elements"))
    }

    /// Records what was expected and what was given.
    pub fn mismatch(mut self, expected: impl fmt::Display, got: impl fmt::Display) -> Self {
        self.expected = Some(expected.to_string());
        self.got = Some(got.to_string());
        self
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::ops::Deref for Invalid {
    type Target = str;
    fn deref(&self) -> &str {
        &self.message
    }
}

impl PartialEq<str> for Invalid {
    fn eq(&self, other: &str) -> bool {
        self.message == other
    }
}

impl PartialEq<&str> for Invalid {
    fn eq(&self, other: &&str) -> bool {
        self.message == *other
    }
}

impl From<String> for Invalid {
    fn from(message: String) -> Self {
        Invalid::new(message)
    }
}

impl From<&str> for Invalid {
    fn from(message: &str) -> Self {
        Invalid::new(message)
    }
}
