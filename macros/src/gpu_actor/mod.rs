//! `#[gpu_actor]`: parse → validate → expand.

mod actor_gpu;
mod device;
mod expand;
mod options;

pub(crate) use options::ERROR_TAGS;
mod parse;
mod validate;

use proc_macro2::TokenStream;
use quote::quote;

use crate::errors::Errors;

/// The macro's entry point.
pub(crate) fn entry(args: TokenStream, input: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let options = options::parse(args, &mut errors);
    let item: syn::ItemImpl = match syn::parse2(input.clone()) {
        Ok(i) => i,
        Err(_) => {
            let msg =
                "#[gpu_actor] goes on an `impl` block of the actor's type, e.g. `#[gpu_actor] impl MyActor { … }`";
            let e = match syn::parse2::<syn::Item>(input.clone()) {
                Ok(item) => syn::Error::new_spanned(first_tokens(&item), msg),
                Err(_) => syn::Error::new(proc_macro2::Span::call_site(), msg),
            }
            .to_compile_error();
            return quote!(#e #input);
        }
    };
    let def = parse::parse(item, options, &mut errors);
    validate::validate(&def, &mut errors);
    if !errors.is_empty() {
        // Re-emit the impl (without our marker attributes) so the IDE keeps working,
        // plus the message enum and client so uses of them do not pile up more errors.
        let compile_errors = errors.to_compile_errors();
        let item = &def.item;
        let fallback = expand::fallback(&def);
        return quote!(#compile_errors #item #fallback);
    }
    expand::expand(&def)
}

/// The keyword and name of an item (`struct A`), to point an error at.
fn first_tokens(item: &syn::Item) -> TokenStream {
    match item {
        syn::Item::Struct(s) => {
            let (k, i) = (&s.struct_token, &s.ident);
            quote!(#k #i)
        }
        syn::Item::Enum(e) => {
            let (k, i) = (&e.enum_token, &e.ident);
            quote!(#k #i)
        }
        syn::Item::Fn(f) => {
            let (k, i) = (&f.sig.fn_token, &f.sig.ident);
            quote!(#k #i)
        }
        other => quote!(#other),
    }
}
