//! `ByteSize`: sizes written as `"512MiB"`, `"1G"` or a plain number of bytes.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A size in bytes, parsed from `"512MiB"`, `"64k"`, `"1G"` or an integer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(pub u64);

impl ByteSize {
    /// `n` mebibytes.
    pub const fn mib(n: u64) -> Self {
        ByteSize(n * 1024 * 1024)
    }

    /// The size in bytes.
    pub const fn bytes(self) -> u64 {
        self.0
    }

    /// Parses `"512MiB"`, `"512M"`, `"1g"`, `"4096"` (binary units, case-insensitive).
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let (num, unit) = s.split_at(split);
        let n: u64 = num.parse().ok()?;
        let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "k" | "kb" | "kib" => 1 << 10,
            "m" | "mb" | "mib" => 1 << 20,
            "g" | "gb" | "gib" => 1 << 30,
            "t" | "tb" | "tib" => 1 << 40,
            _ => return None,
        };
        n.checked_mul(mult).map(ByteSize)
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        for (unit, shift) in [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)] {
            if b != 0 && b.is_multiple_of(1u64 << shift) {
                return write!(f, "{}{unit}", b >> shift);
            }
        }
        write!(f, "{b}")
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Num(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Num(n) => Ok(ByteSize(n)),
            Raw::Text(t) => ByteSize::parse(&t).ok_or_else(|| {
                serde::de::Error::custom(format!("invalid size {t:?} (expected e.g. \"512MiB\")"))
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(ByteSize::parse("512MiB"), Some(ByteSize::mib(512)));
        assert_eq!(ByteSize::parse("1g"), Some(ByteSize(1 << 30)));
        assert_eq!(ByteSize::parse("4096"), Some(ByteSize(4096)));
        assert_eq!(ByteSize::parse("12 parsecs"), None);
        assert_eq!(ByteSize::parse("99999999999T"), None);
        assert_eq!(ByteSize::mib(512).to_string(), "512MiB");
    }
}
