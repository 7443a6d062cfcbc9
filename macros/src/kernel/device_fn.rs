//! `#[device] fn`: a helper that kernels (and other helpers) call.
//!
//! Its body is the same Rust subset as a kernel's, translated by the same walk into a
//! `__device__` function (a C++ template over its generic parameters, so each caller's
//! types instantiate it). The item stays a Rust function of the same name — what the CPU
//! emulation calls — and beside it, in the type namespace, a module of the same name holds
//! what a calling kernel needs: the C++ definition and `collect`, which adds it and its
//! callees, each once and callees first, to the kernel's source; and `COOPERATIVE`, so a
//! kernel whose helper synchronises the block is emulated with its threads together.
//! Recursion is refused: a helper calling itself at its name, and through others by
//! rustc (the `COOPERATIVE` constants of a cycle depend on each other).

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use super::flex::retype_cpu_body;
use super::signature::{self, ParamKind, Role, Signature};
use super::translate::{cuda_params, translate};
use super::{intrinsics, mentions};
use crate::errors::Errors;

/// The macro's entry point.
pub(crate) fn entry(args: TokenStream, input: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let options = super::options::parse(args, &mut errors);
    let mut item = match super::parse_fn(
        input,
        "#[device] goes on a function: `#[device] fn lerp<T: Float>(a: T, b: T, t: T) -> T { … }`",
    ) {
        Ok(f) => f,
        Err(tokens) => return tokens,
    };
    super::spellings::accept_cuda_spellings(&mut item.block);
    if let Some((name, _)) = options.consts.first() {
        errors.at(
            name,
            "`consts(…)` registers a kernel's const generic values; a #[device] fn has none",
        );
    }
    if let Some(bound) = &options.launch_bounds {
        let span = match bound {
            super::options::LaunchBound::Threads(n) => n.span(),
            super::options::LaunchBound::Const(i) => i.span(),
        };
        errors.push(syn::Error::new(
            span,
            "`launch_bounds` bounds a kernel's blocks; a #[device] fn runs in its caller's block: put it on the #[kernel]",
        ));
    }
    if let Some(cuda) = &options.cuda {
        errors.at(
            cuda,
            "a #[device] fn is written in the kernel subset; `cuda = \"…\"` is for whole kernels",
        );
    }
    let krate = crate::crate_path::runtime_path(options.krate.as_ref());
    let sig = signature::parse(&item, &mut errors, Role::DeviceFn);
    let t = translate(&sig, &item.block, &mut errors);
    if !errors.is_empty() {
        let compile_errors = errors.to_compile_errors();
        // The signature stays (callers resolve), the body does not: the errors above are
        // the whole report, not repeated by rustc's about the same statements.
        let stub_body: syn::Block = syn::parse_quote!({ ::core::unreachable!("this #[device] fn did not compile") });
        let none = Uses {
            headers: &[],
            calls: &[],
            structs: &[],
        };
        let stub = expand(&item, &sig, &krate, "", &none, &stub_body);
        return quote!(#compile_errors #stub);
    }
    let source = definition(&sig, &t.body);
    let cpu_block = retype_cpu_body(&item.block, &t.casts, &t.converts, &krate);
    let cpu_block = super::relaxed::relaxed_element_access(&cpu_block, &sig.buffer_names());
    let mut structs = t.structs;
    for p in &sig.params {
        if let ParamKind::Struct(path) = &p.kind {
            structs.push(path.clone());
        }
    }
    let uses = Uses {
        headers: &t.headers,
        calls: &t.calls,
        structs: &structs,
    };
    expand(&item, &sig, &krate, &source, &uses, &cpu_block)
}

/// The C++ definition: `template <typename T> __device__ RET name(params) { body }`.
fn definition(sig: &Signature, body: &str) -> String {
    let template = if sig.generics.is_empty() {
        String::new()
    } else {
        let names: Vec<String> = sig.generics.iter().map(|g| format!("typename {}", g.0)).collect();
        format!("template <{}>\n", names.join(", "))
    };
    let ret = sig
        .ret
        .as_ref()
        .and_then(|t| t.cuda())
        .unwrap_or_else(|| "void".to_string());
    let params: Vec<String> = cuda_params(sig).into_iter().map(|(t, n)| format!("{t} {n}")).collect();
    format!(
        "{template}__device__ __forceinline__ {ret} {}({}) {{\n{body}}}\n",
        super::names::param_cname(&sig.name.to_string()),
        params.join(", ")
    )
}

/// What a helper's source needs besides itself: headers, the helpers it calls and the
/// `#[derive(KernelArg)]` structs it takes or builds.
struct Uses<'a> {
    headers: &'a [&'static str],
    calls: &'a [syn::Path],
    structs: &'a [syn::Path],
}

fn expand(
    item: &syn::ItemFn,
    sig: &Signature,
    krate: &syn::Path,
    source: &str,
    uses: &Uses<'_>,
    cpu_block: &syn::Block,
) -> TokenStream {
    let (headers, calls, structs) = (uses.headers, uses.calls, uses.structs);
    let dsl = quote!(#krate::kernel::dsl);
    let name = &sig.name;
    let name_str = super::names::param_cname(&name.to_string());
    let vis = &item.vis;
    let attrs: Vec<&syn::Attribute> = item.attrs.iter().collect();
    let gen_params: Vec<&syn::TypeParam> = sig.generics.iter().map(|g| &g.2).collect();
    // A return type that is not a scalar was reported; the stub returns nothing.
    let output = match (&sig.ret, &item.sig.output) {
        (Some(super::types::Ty::Unit), syn::ReturnType::Type(..)) => syn::ReturnType::Default,
        (_, o) => o.clone(),
    };
    let mut params = vec![];
    let mut args = vec![];
    for p in &sig.params {
        let n = &p.name;
        args.push(quote!(#n));
        params.push(p.cpu_param(&dsl));
    }
    let header_idents: Vec<TokenStream> = headers
        .iter()
        .map(|h| {
            let h = format_ident!("{}", h);
            quote!(#dsl::scalar::Header::#h)
        })
        .collect();
    let cooperative = mentions(quote::ToTokens::to_token_stream(&item.block), intrinsics::COOPERATIVE);
    // Spanned at the helper's name: recursion through other helpers is a cycle of these
    // constants, which rustc reports at the names of the helpers in the cycle.
    let cooperative_const = quote::quote_spanned! {name.span()=>
        /// Whether the helper (or one it calls) synchronises threads: a kernel calling
        /// it is emulated with each block's threads together. (A cycle of these constants
        /// is a recursion through helpers, which a `#[device] fn` cannot do.)
        pub const COOPERATIVE: bool = #cooperative #(|| #calls::COOPERATIVE)*;
    };
    let doc = format!("What a kernel calling the `#[device] fn {name}` needs: its CUDA C++ and its callees.");
    quote! {
        #(#attrs)*
        #[allow(clippy::too_many_arguments)]
        #vis fn #name<#(#gen_params),*>(#(#params),*) #output {
            #name::body(#(#args),*)
        }

        #[doc = #doc]
        #[doc(hidden)]
        #[allow(non_snake_case)]
        #vis mod #name {
            #![allow(unused_imports, unused_mut, unused_variables, unused_parens, clippy::all)]
            use super::*;
            use #dsl::prelude::*;

            /// The body as Rust: what the CPU emulation runs.
            pub fn body<#(#gen_params),*>(#(#params),*) #output #cpu_block

            /// The `__device__` definition.
            pub const SOURCE: &str = #source;
            #cooperative_const

            /// Adds this helper, after the helpers it calls, to a kernel's source.
            pub fn collect(out: &mut #dsl::source::DeviceFns) {
                if out.begin(::core::concat!(::core::module_path!(), "::", #name_str), #name_str) {
                    #(#calls::collect(out);)*
                    out.define(
                        SOURCE,
                        &[#(#header_idents),*],
                        ::std::vec![#(<#structs as #dsl::KernelArg>::cuda_decl()),*],
                    );
                }
            }
        }
    }
}
