//! Secrets of every built-in format, generated at run time from a seeded generator, so that
//! no secret-shaped literal sits in the repository. Shared by `leak.rs` and `leak_oracle.rs`.
#![allow(dead_code)]

/// splitmix64: deterministic per seed.
pub struct Gen(pub u64);

impl Gen {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    pub fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }

    pub fn choose<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }

    /// `n` characters of `alphabet`; the first ones are a lower-case letter, an upper-case
    /// letter and a digit where the alphabet has them, as real random tokens almost always
    /// have, so that the mixed-classes check passes.
    pub fn pick(&mut self, alphabet: &str, n: usize) -> String {
        let a = alphabet.as_bytes();
        let mut s: Vec<u8> = (0..n).map(|_| a[self.below(a.len())]).collect();
        let mut k = 0;
        for f in [b'k', b'Q', b'7'] {
            if a.contains(&f) && k < n {
                s[k] = f;
                k += 1;
            }
        }
        String::from_utf8(s).unwrap()
    }

    /// [`pick`](Self::pick) with a length from `lo` to `hi`.
    pub fn pick_in(&mut self, alphabet: &str, lo: usize, hi: usize) -> String {
        let n = self.range(lo, hi);
        self.pick(alphabet, n)
    }

    /// [`pick`](Self::pick) with one of `lens` as the length.
    pub fn pick_of(&mut self, alphabet: &str, lens: &[usize]) -> String {
        let n = *self.choose(lens);
        self.pick(alphabet, n)
    }

    /// [`raw`](Self::raw) with a length from `lo` to `hi`.
    pub fn raw_in(&mut self, alphabet: &str, lo: usize, hi: usize) -> String {
        let n = self.range(lo, hi);
        self.raw(alphabet, n)
    }

    /// `n` characters of `alphabet`, uniformly.
    pub fn raw(&mut self, alphabet: &str, n: usize) -> String {
        let a = alphabet.as_bytes();
        (0..n).map(|_| a[self.below(a.len())] as char).collect()
    }
}

pub const ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
pub const LETTERS: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
pub const B64URL: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
pub const B64STD: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
pub const UPPER_DIGIT: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
pub const HEX_LOWER: &str = "0123456789abcdef";
pub const DIGITS: &str = "0123456789";

/// CRC32 (IEEE), bit by bit.
pub fn crc32(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xEDB8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// `n` in six base62 digits.
pub fn base62_6(mut n: u64) -> String {
    let mut out = [b'0'; 6];
    for d in out.iter_mut().rev() {
        *d = BASE62[(n % 62) as usize];
        n /= 62;
    }
    String::from_utf8(out.to_vec()).unwrap()
}

/// The value of base62 digits.
pub fn base62_value(digits: &[u8]) -> Option<u64> {
    digits.iter().try_fold(0u64, |n, b| {
        Some(n * 62 + BASE62.iter().position(|c| c == b)? as u64)
    })
}

/// Standard or URL-safe base64, padded or not.
pub fn base64(bytes: &[u8], url_safe: bool, pad: bool) -> String {
    let alphabet = if url_safe { B64URL } else { B64STD }.as_bytes();
    let mut out = String::new();
    for c in bytes.chunks(3) {
        let n = u32::from(c[0]) << 16
            | u32::from(*c.get(1).unwrap_or(&0)) << 8
            | u32::from(*c.get(2).unwrap_or(&0));
        for k in 0..4 {
            if k <= c.len() {
                out.push(alphabet[(n >> (18 - 6 * k) & 63) as usize] as char);
            } else if pad {
                out.push('=');
            }
        }
    }
    out
}

/// A secret as planted: `text` holds it at `secret` (the bytes a finding fingerprints),
/// with whatever context its format needs (`TWILIO_API_KEY=`, `AccountKey=`, a URL).
pub struct Plant {
    pub name: &'static str,
    pub text: String,
    pub secret: std::ops::Range<usize>,
}

impl Plant {
    fn whole(name: &'static str, text: String) -> Plant {
        let secret = 0..text.len();
        Plant { name, text, secret }
    }

    fn around(name: &'static str, before: &str, secret: &str, after: &str) -> Plant {
        Plant {
            name,
            text: format!("{before}{secret}{after}"),
            secret: before.len()..before.len() + secret.len(),
        }
    }

    pub fn secret(&self) -> &str {
        &self.text[self.secret.clone()]
    }
}

/// The formats [`plant`] makes, by index.
pub const FORMATS: usize = 25;

/// A GitHub- or npm-style token: `prefix`, 30 random characters, their checksum.
pub fn checksummed(g: &mut Gen, prefix: &str) -> String {
    let random = g.pick(ALNUM, 30);
    let sum = base62_6(u64::from(crc32(random.as_bytes())));
    format!("{prefix}{random}{sum}")
}

/// A PEM private key block; line breaks as `newline` (real or escaped).
pub fn pem(g: &mut Gen, newline: &str) -> String {
    let label = g
        .choose(&["", "RSA ", "EC ", "OPENSSH ", "ENCRYPTED ", "DSA "])
        .to_string()
        + &["PRIVATE", "KEY"].join(" ");
    let lines = g.range(2, 12);
    let mut body: Vec<String> = (0..lines).map(|_| g.pick(B64STD, 64)).collect();
    let last = g.range(4, 62);
    let pad = g.choose(&["", "=", "=="]);
    body.push(format!("{}{pad}", g.pick(B64STD, last)));
    format!(
        "-----BEGIN {label}-----{newline}{}{newline}-----END {label}-----",
        body.join(newline)
    )
}

/// A JWT: a header with `alg`, a JSON payload, a signature.
pub fn jwt(g: &mut Gen) -> String {
    let alg = g.choose(&["HS256", "RS256", "ES256", "EdDSA", "PS512"]);
    let header = match g.below(3) {
        0 => format!(r#"{{"alg":"{alg}","typ":"JWT"}}"#),
        1 => format!(
            r#"{{"typ":"JWT","alg":"{alg}","kid":"{}"}}"#,
            g.pick(ALNUM, 16)
        ),
        _ => format!(
            r#"{{"alg" : "{alg}" , "x5t" : ["{}", 12, true, null] }}"#,
            g.pick(ALNUM, 8)
        ),
    };
    let payload = format!(
        r#"{{"sub":"{}","iat":{},"name":"{}"}}"#,
        g.pick_in(ALNUM, 4, 40),
        1_700_000_000 + g.below(100_000_000),
        g.pick_in(LETTERS, 3, 30)
    );
    let sig = g.pick_of(B64URL, &[43, 86, 342]);
    format!(
        "{}.{}.{sig}",
        base64(header.as_bytes(), true, false),
        base64(payload.as_bytes(), true, false)
    )
}

/// A valid secret of format `k` (below [`FORMATS`]), with the context it needs.
pub fn plant(g: &mut Gen, k: usize) -> Plant {
    let w = Plant::whole;
    match k {
        0 => w(
            "anthropic_api_key",
            format!("sk-ant-api03-{}", g.pick(B64URL, 93)),
        ),
        1 => w(
            "openrouter_api_key",
            format!("sk-or-v1-{}", g.pick(HEX_LOWER, 64)),
        ),
        2 => {
            let kind = g.choose(&["proj-", "svcacct-", "admin-"]);
            w(
                "openai_api_key",
                format!("sk-{kind}{}", g.pick_in(B64URL, 40, 160)),
            )
        }
        3 => w("openai_api_key", format!("sk-{}", g.pick(ALNUM, 48))),
        4 => {
            let p = format!("gh{}_", g.choose(&["p", "o", "u", "s", "r"]));
            w("github_token", checksummed(g, &p))
        }
        5 => w(
            "github_pat",
            format!("github_pat_{}_{}", g.pick(ALNUM, 22), g.pick(ALNUM, 59)),
        ),
        6 => w("google_api_key", format!("AIza{}", g.pick(B64URL, 35))),
        7 => w(
            "slack_token",
            format!(
                "xox{}-{}-{}-{}",
                g.choose(&["b", "p", "a"]),
                g.pick(DIGITS, 12),
                g.pick(DIGITS, 13),
                g.pick(ALNUM, 24)
            ),
        ),
        8 => w(
            "slack_app_token",
            format!(
                "xapp-1-A{}-{}-{}",
                g.pick(UPPER_DIGIT, 10),
                g.pick(DIGITS, 13),
                g.pick(HEX_LOWER, 64)
            ),
        ),
        9 => w("brave_search_api_key", format!("BSA{}", g.pick(B64URL, 28))),
        10 => w(
            "aws_access_key_id",
            format!("{}{}", g.choose(&["AKIA", "ASIA"]), g.pick(UPPER_DIGIT, 16)),
        ),
        11 => w(
            "discord_bot_token",
            format!(
                "M{}.{}.{}",
                g.pick(B64URL, 25),
                g.pick(B64URL, 6),
                g.pick(B64URL, 38)
            ),
        ),
        12 => w(
            "telegram_bot_token",
            format!("{}:{}", g.pick(DIGITS, 10), g.pick(B64URL, 35)),
        ),
        13 => {
            let nl = *g.choose(&["\n", "\r\n", "\\n", "\\r\\n", "\\\\n"]);
            let block = pem(g, nl);
            if nl.starts_with('\\') && g.chance(2) {
                // A GCP service-account file.
                let before = format!(
                    r#"{{"type": "service_account", "project_id": "p-{}", "private_key": ""#,
                    g.raw(HEX_LOWER, 6)
                );
                Plant::around("private_key", &before, &block, r#"\n", "client_id": "1"}"#)
            } else {
                w("private_key", block)
            }
        }
        14 => {
            let p = g.choose(&["sk_live_", "sk_test_", "rk_live_", "rk_test_"]);
            w(
                "stripe_api_key",
                format!("{p}{}", g.pick_of(ALNUM, &[24, 99])),
            )
        }
        15 => {
            let p = g.choose(&["glpat-", "gldt-", "glrt-"]);
            w("gitlab_token", format!("{p}{}", g.pick(B64URL, 20)))
        }
        16 => w("npm_token", checksummed(g, "npm_")),
        17 => w(
            "pypi_token",
            format!("pypi-AgEIcHlwaS5vcmc{}", g.pick_in(B64URL, 50, 200)),
        ),
        18 => w("huggingface_token", format!("hf_{}", g.pick(LETTERS, 34))),
        19 => w(
            "sendgrid_api_key",
            format!("SG.{}.{}", g.pick(B64URL, 22), g.pick(B64URL, 43)),
        ),
        20 => {
            let sid = format!("SK{}", g.pick(HEX_LOWER, 32));
            let before = g.choose(&[
                "TWILIO_API_KEY=",
                "twilio: {\"api_key\": \"",
                "export Twilio_Key=",
            ]);
            Plant::around("twilio_api_key", before, &sid, "")
        }
        21 => w(
            "google_oauth_client_secret",
            format!("GOCSPX-{}", g.pick(B64URL, 28)),
        ),
        22 => {
            let key = format!("{}==", g.pick(B64STD, 86));
            Plant::around(
                "azure_storage_key",
                "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=",
                &key,
                ";EndpointSuffix=core.windows.net",
            )
        }
        23 => w("jwt", jwt(g)),
        _ => {
            let scheme = g.choose(&["postgres", "https", "mongodb+srv", "redis", "amqp"]);
            let user = g.choose(&["", "app", "admin", "u%40x"]);
            let pass = format!(
                "{}{}",
                g.pick_in(ALNUM, 8, 24),
                g.choose(&["", "!", "%21", "-_"])
            );
            Plant::around(
                "url_password",
                &format!("{scheme}://{user}:"),
                &pass,
                "@db.internal:5432/app",
            )
        }
    }
}
