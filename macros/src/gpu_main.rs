//! `#[gpu_main]`: makes `main` re-enter as an isolated device's GPU worker when started
//! as one (the worker is this same executable; see the runtime's `isolation`).

use proc_macro2::TokenStream;
use quote::quote;

use crate::crate_path::runtime_path;
use crate::errors::Errors;

pub(crate) fn entry(args: TokenStream, input: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    if !args.is_empty() {
        errors.at(&args, "#[gpu_main] takes no arguments; write `#[gpu_main]`");
    }
    let mut f: syn::ItemFn = match syn::parse2(input.clone()) {
        Ok(f) => f,
        Err(_) => {
            let mut e = syn::Error::new_spanned(
                &input,
                "#[gpu_main] goes on the program's `fn main`, which it makes start isolated devices' workers",
            );
            if let Some(more) = errors.into_error() {
                e.combine(more);
            }
            return quote!(#input).into_iter().chain(e.to_compile_error()).collect();
        }
    };
    if f.sig.ident != "main" {
        errors.at(
            &f.sig.ident,
            "#[gpu_main] goes on `fn main`: a worker re-enters the executable at `main`; for another function, call \
             `isolation::enter_worker_if_requested()` at the top of `main` yourself",
        );
    }
    if let Some(e) = errors.into_error() {
        return quote!(#f).into_iter().chain(e.to_compile_error()).collect();
    }
    let krate = runtime_path(None);
    // First statement: a worker never gets past it (it runs on a thread of its own, so
    // this also works inside `#[tokio::main]`'s runtime).
    let enter: syn::Stmt = syn::parse_quote!(#krate::isolation::enter_worker_if_requested(););
    f.block.stmts.insert(0, enter);
    quote!(#f)
}
