//! Finds the path under which the user's crate sees the runtime.

use proc_macro2::Span;
use proc_macro_crate::{crate_name, FoundCrate};
use quote::quote;

/// `::atomr_accel_cuda` for users of the facade, `::atomr_accel_cuda_runtime` for users of
/// the runtime alone, `crate` inside the facade or runtime themselves (or whatever
/// `crate = path` says).
pub(crate) fn runtime_path(explicit: Option<&syn::Path>) -> syn::Path {
    if let Some(p) = explicit {
        return p.clone();
    }
    for name in ["atomr-accel-cuda", "atomr-accel-cuda-runtime"] {
        match crate_name(name) {
            Ok(FoundCrate::Itself) => {
                // proc-macro-crate says `Itself` for a package's examples and benches too,
                // where `crate` is the example, not the library: compare the target name.
                // A doc test of the library is compiled as a crate of its own, though cargo's
                // CARGO_CRATE_NAME still names the library there: rustdoc marks its doc-test
                // compiles with UNSTABLE_RUSTDOC_TEST_PATH.
                let lib = name.replace('-', "_");
                let doc_test = std::env::var_os("UNSTABLE_RUSTDOC_TEST_PATH").is_some();
                if !doc_test && std::env::var("CARGO_CRATE_NAME").is_ok_and(|c| c == lib) {
                    return syn::parse_quote!(crate);
                }
                let ident = syn::Ident::new(&lib, Span::call_site());
                return syn::parse_quote!(::#ident);
            }
            Ok(FoundCrate::Name(n)) => {
                let ident = syn::Ident::new(&n, Span::call_site());
                return syn::parse_quote!(::#ident);
            }
            Err(_) => continue,
        }
    }
    let fallback = quote!(::atomr_accel_cuda);
    syn::parse2(fallback).expect("a valid path")
}
