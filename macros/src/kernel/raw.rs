//! Validate a raw CUDA kernel (`#[kernel(cuda = "…")]`): its parameter list must be the
//! one the Rust signature generates, so the typed launcher passes what it expects.

use super::signature::Signature;
use super::translate::cuda_params;
use crate::errors::Errors;

/// Spellings C++ accepts for one type, reduced to ours.
fn normalize(ty: &str) -> String {
    let t = ty.replace("__restrict__", " ").replace('*', " * ");
    let mut words: Vec<&str> = t.split_whitespace().collect();
    // `float const *` → `const float *`.
    if words.len() >= 2 && words[1] == "const" {
        words.swap(0, 1);
    }
    let s = words.join(" ").replace(" *", "*");
    match s.as_str() {
        "size_t" | "unsigned long" | "uint64_t" => "unsigned long long".into(),
        "long" | "int64_t" => "long long".into(),
        "unsigned" | "uint32_t" => "unsigned int".into(),
        "int32_t" => "int".into(),
        "half" => "__half".into(),
        other => other.to_string(),
    }
}

/// Splits `T name` into the type (everything but the last identifier).
fn param_type(p: &str) -> String {
    let p = p.trim();
    let cut = p
        .char_indices()
        .rev()
        .find(|(_, c)| !(c.is_alphanumeric() || *c == '_'))
        .map_or(0, |(i, _)| i + 1);
    normalize(&p[..cut])
}

pub(crate) fn check(sig: &Signature, cuda: &syn::LitStr, errors: &mut Errors) {
    let src = cuda.value();
    let name = sig.name.to_string();
    let expected: Vec<String> = cuda_params(sig).into_iter().map(|(t, _)| normalize(&t)).collect();
    let wanted = expected.join(", ");
    let hint = format!(
        "declare it `extern \"C\" __global__ void {name}({wanted})` (a `&[T]` is passed as a pointer and its \
         length as `unsigned long long`)"
    );
    let Some(at) = src
        .find(&format!("void {name}("))
        .or_else(|| src.find(&format!("void {name} (")))
    else {
        errors.at(cuda, format!("the CUDA source has no kernel `{name}`; {hint}"));
        return;
    };
    if !src[..at].contains("__global__") || !src[..at].contains("extern \"C\"") {
        errors.at(
            cuda,
            format!("kernel `{name}` must be `extern \"C\" __global__`; {hint}"),
        );
        return;
    }
    let open = at + src[at..].find('(').unwrap_or(0);
    let Some(close) = src[open..].find(')').map(|c| open + c) else {
        errors.at(cuda, format!("cannot read the parameter list of `{name}`; {hint}"));
        return;
    };
    let inner = src[open + 1..close].trim();
    let got: Vec<String> = if inner.is_empty() || inner == "void" {
        vec![]
    } else {
        inner.split(',').map(param_type).collect()
    };
    if got != expected {
        let first = got
            .iter()
            .zip(&expected)
            .position(|(g, e)| g != e)
            .unwrap_or(got.len().min(expected.len()));
        let detail = match (got.get(first), expected.get(first)) {
            (Some(g), Some(e)) => format!("parameter {} is `{g}`, the Rust signature needs `{e}`", first + 1),
            _ => format!(
                "it has {} parameters, the Rust signature needs {}",
                got.len(),
                expected.len()
            ),
        };
        errors.at(
            cuda,
            format!("the CUDA kernel's parameters do not match the Rust signature: {detail}; {hint}"),
        );
    }
}
