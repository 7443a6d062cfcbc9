//! The options of `#[gpu_actor(...)]`: strict keys, each at most once.

use std::time::Duration;

use proc_macro2::{Span, TokenStream};
use syn::meta::ParseNestedMeta;
use syn::spanned::Spanned;
use syn::{Ident, LitInt, LitStr};

use crate::errors::Errors;

const KEYS: &str = "`crate`, `supervision`, `dispatcher`, `mailbox`, `ask_timeout`, `wire`, `device`, `feature`";
const SUPERVISION_KEYS: &str = "`restart_on`, `resume_on`, `max_restarts`, `within`";

/// Parsed options.
#[derive(Default)]
pub(crate) struct Options {
    pub(crate) krate: Option<syn::Path>,
    pub(crate) restart_on: Vec<Ident>,
    pub(crate) resume_on: Vec<Ident>,
    pub(crate) max_restarts: Option<LitInt>,
    pub(crate) within: Option<(Duration, Span)>,
    pub(crate) dispatcher_gpu: bool,
    pub(crate) mailbox: Option<LitInt>,
    pub(crate) ask_timeout: Option<(Duration, Span)>,
    pub(crate) has_supervision: bool,
    /// `wire`: the messages can cross to an isolated device's worker process.
    pub(crate) wire: bool,
    /// `device`: a library actor of the runtime whose `#[handler(device)]` methods become
    /// `Device` methods (through a generated `<actor>_device_surface!` the device tier
    /// expands), and whose named dtype sets get one mapping trait each.
    pub(crate) device: Option<DeviceOption>,
    /// `feature = "fft"`: the handlers exist only with that cargo feature of the crate
    /// that declares the actor; without it the messages, client and surfaces stay (so
    /// callers compile the same) and every request is answered `Unsupported`, naming
    /// the feature.
    pub(crate) feature: Option<LitStr>,
}

/// `device` on a library actor.
pub(crate) struct DeviceOption {
    /// Where the key was written.
    pub(crate) span: Span,
}

/// Error tags a decider can match: the `GpuError` variants, in their order. The one
/// list: `#[derive(GpuErrorTags)]` on `GpuError` checks the enum against it at compile
/// time and generates `GpuError::tag()` from the enum.
pub(crate) const ERROR_TAGS: &[&str] = &[
    "ContextPoisoned",
    "DeviceLost",
    "OutOfMemory",
    "Stale",
    "InvalidArgument",
    "Library",
    "Numerical",
    "KernelFault",
    "Unsupported",
    "Backpressure",
    "Timeout",
    "Stopped",
    "MailboxFull",
    "NoReply",
    "NameTaken",
    "Io",
    "Internal",
    "Other",
];

/// Parses `"250ms"`, `"60s"`, `"2m"`.
pub(crate) fn parse_duration(lit: &LitStr) -> syn::Result<Duration> {
    let text = lit.value();
    let bad = || {
        syn::Error::new_spanned(
            lit,
            format!("`{text}` is not a duration: write a whole number with a unit, e.g. \"500ms\", \"60s\" or \"2m\""),
        )
    };
    let (num, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?);
    let n: u64 = num.parse().map_err(|_| bad())?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        _ => Err(bad()),
    }
}

/// Records "set twice" for a key already seen.
fn once(seen: &mut Vec<String>, meta: &ParseNestedMeta, errors: &mut Errors) -> bool {
    let key = meta.path.get_ident().map(|i| i.to_string()).unwrap_or_default();
    if seen.contains(&key) {
        errors.at(&meta.path, format!("`{key}` is set twice; keep one"));
        return false;
    }
    seen.push(key);
    true
}

fn tag_list(meta: &ParseNestedMeta, errors: &mut Errors) -> syn::Result<Vec<Ident>> {
    let value = meta.value()?;
    let tags: Vec<Ident> = if value.peek(syn::token::Bracket) {
        let content;
        syn::bracketed!(content in value);
        content
            .parse_terminated(Ident::parse_any, syn::Token![,])?
            .into_iter()
            .collect()
    } else {
        vec![value.parse()?]
    };
    for t in &tags {
        if !ERROR_TAGS.contains(&t.to_string().as_str()) {
            errors.at(
                t,
                format!(
                    "`{t}` is not a GpuError variant; expected one of: {}",
                    ERROR_TAGS.join(", ")
                ),
            );
        }
    }
    Ok(tags)
}

use syn::ext::IdentExt;

/// Parses the attribute's arguments, recording every problem.
pub(crate) fn parse(args: TokenStream, errors: &mut Errors) -> Options {
    let mut o = Options::default();
    let mut seen = vec![];
    let mut pending = Errors::default();
    let parser = syn::meta::parser(|meta| {
        if !once(&mut seen, &meta, &mut pending) {
            // Consume the value so parsing continues.
            return skip_value(&meta);
        }
        if meta.path.is_ident("crate") {
            o.krate = Some(meta.value()?.parse()?);
        } else if meta.path.is_ident("supervision") {
            o.has_supervision = true;
            let mut sub_seen = vec![];
            meta.parse_nested_meta(|sub| {
                if !once(&mut sub_seen, &sub, &mut pending) {
                    return skip_value(&sub);
                }
                if sub.path.is_ident("restart_on") {
                    o.restart_on = tag_list(&sub, &mut pending)?;
                } else if sub.path.is_ident("resume_on") {
                    o.resume_on = tag_list(&sub, &mut pending)?;
                } else if sub.path.is_ident("max_restarts") {
                    o.max_restarts = Some(sub.value()?.parse()?);
                } else if sub.path.is_ident("within") {
                    let lit: LitStr = sub.value()?.parse()?;
                    match parse_duration(&lit) {
                        Ok(d) => o.within = Some((d, lit.span())),
                        Err(e) => pending.push(e),
                    }
                } else {
                    pending.at(
                        &sub.path,
                        format!("unknown supervision key; expected one of {SUPERVISION_KEYS}"),
                    );
                    return skip_value(&sub);
                }
                Ok(())
            })?;
        } else if meta.path.is_ident("dispatcher") {
            let v: Ident = meta.value()?.parse()?;
            match v.to_string().as_str() {
                "gpu" => o.dispatcher_gpu = true,
                "shared" => o.dispatcher_gpu = false,
                _ => pending.at(
                    &v,
                    "unknown dispatcher; expected `gpu` (a dedicated thread) or `shared`",
                ),
            }
        } else if meta.path.is_ident("mailbox") {
            o.mailbox = Some(meta.value()?.parse()?);
        } else if meta.path.is_ident("wire") {
            if !meta.input.is_empty() && !meta.input.peek(syn::Token![,]) {
                pending.at(&meta.path, "`wire` is a flag and takes no value; write `wire`");
                return skip_value(&meta);
            }
            o.wire = true;
        } else if meta.path.is_ident("device") {
            if !meta.input.is_empty() && !meta.input.peek(syn::Token![,]) {
                pending.at(
                    &meta.path,
                    "`device` is a flag and takes no value: the public bound of each dtype set is given where the \
                     device tier expands the generated `<actor>_device_surface!`",
                );
                return skip_value(&meta);
            }
            o.device = Some(DeviceOption { span: meta.path.span() });
        } else if meta.path.is_ident("feature") {
            let value = meta.value()?;
            let mut written = TokenStream::new();
            while !value.is_empty() && !value.peek(syn::Token![,]) {
                written.extend([value.parse::<proc_macro2::TokenTree>()?]);
            }
            match syn::parse2::<LitStr>(written.clone()) {
                Ok(f) if !f.value().is_empty() => o.feature = Some(f),
                _ if written.is_empty() => pending.at(
                    &meta.path,
                    "`feature` takes the cargo feature's name as a string, e.g. `feature = \"fft\"`",
                ),
                _ => pending.at(
                    &written,
                    "`feature` takes the cargo feature's name as a string, e.g. `feature = \"fft\"`",
                ),
            }
        } else if meta.path.is_ident("ask_timeout") {
            let lit: LitStr = meta.value()?.parse()?;
            match parse_duration(&lit) {
                Ok(d) => o.ask_timeout = Some((d, lit.span())),
                Err(e) => pending.push(e),
            }
        } else {
            pending.at(&meta.path, format!("unknown #[gpu_actor] key; expected one of {KEYS}"));
            return skip_value(&meta);
        }
        Ok(())
    });
    if let Err(e) = syn::parse::Parser::parse2(parser, args) {
        errors.push(e);
    }
    if let Some(e) = pending.into_error() {
        errors.push(e);
    }
    o
}

/// Skips `= value` or `(...)` after a rejected key.
fn skip_value(meta: &ParseNestedMeta) -> syn::Result<()> {
    if meta.input.peek(syn::Token![=]) {
        let _: TokenStream = {
            meta.value()?;
            let mut ts = TokenStream::new();
            while !meta.input.is_empty() && !meta.input.peek(syn::Token![,]) {
                let tt: proc_macro2::TokenTree = meta.input.parse()?;
                ts.extend([tt]);
            }
            ts
        };
    } else if meta.input.peek(syn::token::Paren) {
        let content;
        syn::parenthesized!(content in meta.input);
        // Consumed whole: syn reports what a parenthesized group leaves unread.
        let _: TokenStream = content.parse()?;
    }
    Ok(())
}
