//! `#[derive(GpuErrorTags)]`, for the runtime's `GpuError` alone: the one list of error
//! tags ([`ERROR_TAGS`], what `#[gpu_actor(supervision(restart_on = [...]))]` accepts)
//! checked against the enum's variants at compile time, and `GpuError::tag()` generated
//! from the variants — so the two cannot drift apart.

use proc_macro2::TokenStream;
use quote::quote;

use crate::gpu_actor::ERROR_TAGS;

/// The derive's expansion: `tag()` and `TAGS`, or an error naming the difference.
pub(crate) fn derive(input: TokenStream) -> TokenStream {
    let item: syn::DeriveInput = match syn::parse2(input) {
        Ok(i) => i,
        Err(e) => return e.to_compile_error(),
    };
    let syn::Data::Enum(data) = &item.data else {
        return syn::Error::new_spanned(&item.ident, "GpuErrorTags derives for the error enum").to_compile_error();
    };
    let name = &item.ident;
    let variants: Vec<&syn::Ident> = data.variants.iter().map(|v| &v.ident).collect();
    let names: Vec<String> = variants.iter().map(|v| v.to_string()).collect();
    let missing: Vec<&str> = ERROR_TAGS
        .iter()
        .copied()
        .filter(|t| !names.iter().any(|n| n == t))
        .collect();
    let unlisted: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|n| !ERROR_TAGS.contains(n))
        .collect();
    if !missing.is_empty() || !unlisted.is_empty() {
        return syn::Error::new_spanned(
            name,
            format!(
                "the macros' ERROR_TAGS and the variants of `{name}` differ (not variants: {missing:?}; not in \
                 ERROR_TAGS: {unlisted:?}): edit macros/src/gpu_actor/options.rs"
            ),
        )
        .to_compile_error();
    }
    quote! {
        impl #name {
            /// Every variant's tag, in declaration order: what a supervision decider
            /// (`restart_on`, `resume_on`) can name.
            pub const TAGS: &'static [&'static str] = &[#(#names),*];

            /// The variant's name, for deciders and tagged panic messages.
            pub fn tag(&self) -> &'static str {
                match self {
                    #(#name::#variants { .. } => #names,)*
                }
            }
        }
    }
}
