//! A small JSON writer (the samples are flat; no serialisation crate needed).

use std::fmt::Write;

pub fn string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

pub fn opt_string(out: &mut String, s: Option<&str>) {
    match s {
        Some(s) => string(out, s),
        None => out.push_str("null"),
    }
}

pub fn opt_u64(out: &mut String, v: Option<u64>) {
    match v {
        Some(v) => {
            let _ = write!(out, "{v}");
        }
        None => out.push_str("null"),
    }
}

pub fn string_list(out: &mut String, items: &[String]) {
    out.push('[');
    for (k, s) in items.iter().enumerate() {
        if k > 0 {
            out.push_str(", ");
        }
        string(out, s);
    }
    out.push(']');
}

/// An object from (key, already-encoded JSON value) pairs.
pub fn object(pairs: &[(&str, String)]) -> String {
    let mut out = String::from("{");
    for (k, (key, value)) in pairs.iter().enumerate() {
        if k > 0 {
            out.push_str(", ");
        }
        string(&mut out, key);
        out.push_str(": ");
        out.push_str(value);
    }
    out.push('}');
    out
}

pub fn quoted(s: &str) -> String {
    let mut out = String::new();
    string(&mut out, s);
    out
}

pub fn list(items: &[String]) -> String {
    let mut out = String::new();
    string_list(&mut out, items);
    out
}
