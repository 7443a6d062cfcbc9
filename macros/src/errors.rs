//! Error collection: every problem is reported, each at its token, in one build.

use proc_macro2::TokenStream;
use quote::{quote, ToTokens};

/// Gathers errors during parse and validation (serde_derive's `Ctxt` habit).
#[derive(Default)]
pub(crate) struct Errors(Option<syn::Error>);

impl Errors {
    /// Records an error spanning `tokens`.
    pub(crate) fn at(&mut self, tokens: impl ToTokens, msg: impl std::fmt::Display) {
        self.push(syn::Error::new_spanned(tokens, msg));
    }

    /// Records an already-built error.
    pub(crate) fn push(&mut self, e: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(e),
            None => self.0 = Some(e),
        }
    }

    /// The combined error, if any.
    pub(crate) fn into_error(self) -> Option<syn::Error> {
        self.0
    }

    /// True if nothing was recorded.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// The combined `compile_error!`s (empty when there are none).
    pub(crate) fn to_compile_errors(&self) -> TokenStream {
        self.0.as_ref().map(|e| e.to_compile_error()).unwrap_or_default()
    }
}

/// A marker attribute used outside `#[gpu_actor]`: the item stays, with an error at it.
pub(crate) fn misplaced(name: &str, item: TokenStream) -> TokenStream {
    let msg = format!(
        "#[{name}] only marks methods inside an `impl` block annotated with #[gpu_actor]; \
         move this method into such an impl, or remove the attribute"
    );
    let err = match syn::parse2::<syn::Item>(item.clone()) {
        Ok(syn::Item::Fn(f)) => syn::Error::new_spanned(&f.sig.ident, msg),
        Ok(other) => syn::Error::new_spanned(other, msg),
        Err(_) => syn::Error::new(proc_macro2::Span::call_site(), msg),
    };
    let err = err.to_compile_error();
    quote!(#err #item)
}
