//! `#[kernel(…)]` options: strict, each key once, unknown keys listed with the valid ones.

use proc_macro2::TokenStream;
use syn::parse::Parser;

use crate::errors::Errors;

/// The parsed options.
#[derive(Default)]
pub(crate) struct Options {
    /// `cuda = "…"`: a raw CUDA C++ kernel replacing the translation.
    pub(crate) cuda: Option<syn::LitStr>,
    /// `crate = path`: where the runtime is.
    pub(crate) krate: Option<syn::Path>,
}

const KEYS: &str = "valid options: `cuda = \"…\"` (a raw CUDA C++ kernel), `crate = path`";

pub(crate) fn parse(args: TokenStream, errors: &mut Errors) -> Options {
    let mut o = Options::default();
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("cuda") {
            if o.cuda.is_some() {
                return Err(meta.error("`cuda` is set twice"));
            }
            o.cuda = Some(meta.value()?.parse()?);
        } else if meta.path.is_ident("crate") {
            if o.krate.is_some() {
                return Err(meta.error("`crate` is set twice"));
            }
            o.krate = Some(meta.value()?.parse()?);
        } else {
            return Err(meta.error(format!("unknown #[kernel] option; {KEYS}")));
        }
        Ok(())
    });
    if let Err(e) = parser.parse2(args) {
        errors.push(e);
    }
    o
}
