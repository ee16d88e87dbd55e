//! docs/NETWORK.md against the code: the entry table's examples are what `Allowlist`
//! allows and refuses, the quoted config errors are the policy's, and the quoted 403
//! answers are what the proxy sends.
#![cfg(unix)]

use std::io::{self, Read, Write};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::time::Duration;

use stockade::Policy;
use stockade::guard::egress::{Allowlist, Cidr, Egress, Proxy};

const DOC: &str = include_str!("../docs/NETWORK.md");

/// The lines of the section whose heading is `heading`, up to the next `## `.
fn section(heading: &str) -> Vec<&'static str> {
    let mut lines = DOC.lines().skip_while(|l| *l != heading);
    assert!(lines.next().is_some(), "docs/NETWORK.md lost `{heading}`");
    lines.take_while(|l| !l.starts_with("## ")).collect()
}

/// The bodies of the ```text blocks.
fn text_blocks() -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in DOC.lines() {
        let fence = line.trim_start();
        match (&mut current, fence.strip_prefix("```")) {
            (None, Some("text")) => current = Some(String::new()),
            (Some(body), Some("")) => {
                out.push(std::mem::take(body));
                current = None;
            }
            (Some(body), _) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, _) => {}
        }
    }
    out
}

/// The `code` spans of a table cell, each with the port written after it (`` `x` port 80 ``).
fn spans(cell: &str) -> Vec<(String, Option<u16>)> {
    let parts: Vec<&str> = cell.split('`').collect();
    parts
        .iter()
        .enumerate()
        .skip(1)
        .step_by(2)
        .map(|(i, span)| {
            let port = parts
                .get(i + 1)
                .and_then(|after| after.trim_start().strip_prefix("port "))
                .and_then(|p| p.split(|c: char| !c.is_ascii_digit()).next())
                .map(|p| p.parse().unwrap());
            (span.to_string(), port)
        })
        .collect()
}

#[test]
fn the_entry_table_is_what_the_allowlist_does() {
    let mut rows = 0;
    for line in section("## `allow_domains` entries") {
        let cells: Vec<&str> = line.split(" | ").collect();
        if cells.len() != 3 || !cells[0].starts_with("| `") {
            continue;
        }
        rows += 1;
        let entry = cells[0]
            .trim_start_matches("| ")
            .trim_matches('`')
            .to_string();
        let list = Allowlist::parse(std::slice::from_ref(&entry))
            .unwrap_or_else(|e| panic!("{entry}: {e}"));
        // The entry's own port, or every port when it has none.
        let port = entry
            .rsplit_once(':')
            .filter(|(h, _)| !h.contains(':') || h.ends_with(']'))
            .map(|(_, p)| p.parse::<u16>().unwrap());
        let ports: Vec<u16> = match port {
            Some(p) => vec![p],
            None => vec![1, 80, 443, 65535],
        };
        for (host, _) in spans(cells[1]) {
            for &p in &ports {
                assert!(
                    list.allows(&host, p),
                    "{entry} should allow {host} port {p}"
                );
            }
            if let Some(p) = port {
                assert!(!list.allows(&host, p % 65535 + 1), "{entry}: {host}");
            }
        }
        for (host, at) in spans(cells[2].trim_end_matches(" |")) {
            for p in at.map_or(ports.clone(), |p| vec![p]) {
                assert!(
                    !list.allows(&host, p),
                    "{entry} should not allow {host} port {p}"
                );
            }
        }
    }
    assert!(rows >= 8, "the entry table has {rows} rows");
}

#[test]
fn the_quoted_config_errors_are_the_policys() {
    let quoted: Vec<String> = text_blocks()
        .iter()
        .flat_map(|b| b.lines().map(str::to_string).collect::<Vec<_>>())
        .filter(|l| l.starts_with("invalid sandbox config"))
        .collect();
    let configs = [
        "[sandbox]\nnetwork = \"allow\"\nallow_domains = [\"github.com\", \"*.*.example.com\"]\n",
        "[sandbox]\nnetwork = \"allow\"\nallow_private = [\"10.0.0.1/8\"]\n",
    ];
    let errors: Vec<String> = configs
        .iter()
        .map(|c| Policy::from_config(c).unwrap_err().to_string())
        .collect();
    assert_eq!(quoted, errors);
    let e = Policy::from_config("[sandbox]\nallow_domains = [\"github.com\"]\n").unwrap_err();
    assert!(DOC.contains(&format!("`{e}`")), "{e}");
}

/// Sends a `CONNECT` to a proxy that allows `allow` (every name resolving to `10.20.0.5`)
/// and returns its whole answer, with `\n` line ends.
fn refused_connect(allow: &str, target: &str) -> String {
    let egress = Egress::new(Allowlist::parse(&[allow.to_string()]).unwrap(), Vec::new())
        .with_resolver(|_, _| -> io::Result<Vec<IpAddr>> {
            Ok(vec!["10.20.0.5".parse().unwrap()])
        });
    let proxy = Proxy::new(egress);
    let addr = proxy
        .serve_http(TcpListener::bind("127.0.0.1:0").unwrap())
        .unwrap();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes())
        .unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8(out).unwrap().replace("\r\n", "\n")
}

#[test]
fn the_quoted_refusals_are_what_the_proxy_answers() {
    let blocks: Vec<String> = text_blocks()
        .into_iter()
        .filter(|b| b.contains("stockade egress proxy:"))
        .collect();
    assert_eq!(blocks.len(), 2, "{blocks:?}");
    // The first is a whole answer, head and body; Content-Length counts the body.
    assert_eq!(refused_connect("github.com", "example.com:443"), blocks[0]);
    // The second is a body.
    let answer = refused_connect("registry.internal.example", "registry.internal.example:443");
    assert!(answer.starts_with("HTTP/1.1 403 Forbidden\n"), "{answer}");
    assert!(answer.ends_with(&format!("\n\n{}", blocks[1])), "{answer}");
    // With the range allowed, the same name passes the decision.
    let allowed = Egress::new(
        Allowlist::parse(&["registry.internal.example".to_string()]).unwrap(),
        Cidr::parse_all(&["10.20.0.0/16".to_string()]).unwrap(),
    )
    .with_resolver(|_, _| -> io::Result<Vec<IpAddr>> { Ok(vec!["10.20.0.5".parse().unwrap()]) });
    assert!(allowed.decide("registry.internal.example", 443).is_ok());
}
