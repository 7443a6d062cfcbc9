//! `#[kernel]`: parse (options, signature) → validate + translate (the body, to CUDA
//! C++; or the raw CUDA option's parameter list) → expand (the kernel's module).

mod device_fn;
mod expand;
mod flex;
mod intrinsics;
mod names;
mod options;
mod raw;
mod relaxed;
mod signature;
mod spellings;
mod translate;
mod types;

use proc_macro2::{TokenStream, TokenTree};
use quote::quote;

use crate::errors::Errors;

/// True if any identifier in `tokens` is one of `names`.
fn mentions(tokens: TokenStream, names: &[&str]) -> bool {
    tokens.into_iter().any(|t| match t {
        TokenTree::Ident(i) => names.iter().any(|n| i == n),
        TokenTree::Group(g) => mentions(g.stream(), names),
        _ => false,
    })
}

/// The function the attribute is on, or the input with an error saying where the
/// attribute goes (`hint`).
fn parse_fn(input: TokenStream, hint: &str) -> Result<syn::ItemFn, TokenStream> {
    syn::parse2(input.clone()).map_err(|_| {
        let e = syn::Error::new(proc_macro2::Span::call_site(), hint).to_compile_error();
        quote!(#e #input)
    })
}

/// Each `consts(N = [...])` entry names a const generic of the kernel and lists values
/// of its kind.
fn check_const_values(sig: &signature::Signature, consts: &[(syn::Ident, Vec<syn::Lit>)], errors: &mut Errors) {
    for (name, values) in consts {
        let Some((_, prim, _)) = sig.consts.iter().find(|c| &c.0 == name) else {
            errors.at(
                name,
                format!("`{name}` is not a const generic parameter of this #[kernel]"),
            );
            continue;
        };
        let boolean = *prim == types::Prim::Bool;
        for v in values {
            if matches!(v, syn::Lit::Bool(_)) != boolean {
                errors.at(v, format!("`{name}` is a `{}`: list values of that type", prim.rust()));
            }
        }
    }
}

/// `launch_bounds = …`: a literal (range-checked by the option parser) or an integer
/// const generic of the kernel, whose registered values are thread counts too; not with
/// a raw `cuda = "…"` kernel, whose source writes its own `__launch_bounds__`. Returns
/// the bound as the CUDA source spells it and as the launcher computes it.
fn check_launch_bounds(
    sig: &signature::Signature,
    options: &options::Options,
    errors: &mut Errors,
) -> Option<(String, TokenStream)> {
    let bound = options.launch_bounds.as_ref()?;
    if let Some(cuda) = &options.cuda {
        errors.at(
            cuda,
            "`launch_bounds` sets a translated kernel's `__launch_bounds__`; a `cuda = \"…\"` kernel writes \
             `__launch_bounds__(N)` in its own source",
        );
        return None;
    }
    match bound {
        options::LaunchBound::Threads(n) => Some((n.base10_digits().to_string(), quote!(#n))),
        options::LaunchBound::Const(name) => {
            let Some((_, prim, _)) = sig.consts.iter().find(|c| &c.0 == name) else {
                errors.at(
                    name,
                    format!(
                        "`{name}` is not a const generic parameter of this #[kernel]; give `launch_bounds` a \
                         thread count (`launch_bounds = 256`) or declare `const {name}: u32`"
                    ),
                );
                return None;
            };
            if prim.is_float() || *prim == types::Prim::Bool {
                errors.at(
                    name,
                    format!(
                        "`{name}` is a `{}`: `launch_bounds` takes an integer const generic",
                        prim.rust()
                    ),
                );
                return None;
            }
            let listed = options.consts.iter().filter(|(n, _)| n == name).flat_map(|(_, v)| v);
            for v in listed {
                if let syn::Lit::Int(i) = v {
                    if !matches!(i.base10_parse::<i64>(), Ok(1..=1024)) {
                        errors.at(
                            v,
                            format!("`{name}` bounds a block's threads (`launch_bounds = {name}`): list values from 1 to 1024"),
                        );
                    }
                }
            }
            Some((names::param_cname(&name.to_string()), quote!((#name as u32))))
        }
    }
}

/// `#[device] fn`'s entry point.
pub(crate) fn device_fn_entry(args: TokenStream, input: TokenStream) -> TokenStream {
    device_fn::entry(args, input)
}

/// The macro's entry point.
pub(crate) fn entry(args: TokenStream, input: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let options = options::parse(args, &mut errors);
    let mut item = match parse_fn(
        input,
        "#[kernel] goes on a function: `#[kernel] fn saxpy<T: Float>(a: T, x: &[T], y: &mut [T]) { … }`",
    ) {
        Ok(f) => f,
        Err(tokens) => return tokens,
    };
    spellings::accept_cuda_spellings(&mut item.block);
    let krate = crate::crate_path::runtime_path(options.krate.as_ref());
    let sig = signature::parse(&item, &mut errors, signature::Role::Kernel);
    check_const_values(&sig, &options.consts, &mut errors);
    let bound = check_launch_bounds(&sig, &options, &mut errors);
    let body_tokens = quote::ToTokens::to_token_stream(&item.block);
    let mut cpu_block = item.block.clone();
    let mut calls = vec![];
    let mut structs = vec![];
    let (kernel_source, mut headers) = match &options.cuda {
        Some(cuda) => {
            raw::check(&sig, cuda, &mut errors);
            if item.block.stmts.is_empty() {
                errors.at(
                    &item.block,
                    "give a `cuda = \"…\"` kernel a Rust body too: it is the CPU device's emulation of the kernel \
                     (or call `cpu_unsupported()` in it, and the CPU device answers `Unsupported`)",
                );
            }
            (cuda.value(), vec![])
        }
        None => {
            let t = translate::translate(&sig, &item.block, &mut errors);
            let retyped = flex::retype_cpu_body(&item.block, &t.casts, &t.converts, &krate);
            *cpu_block = relaxed::relaxed_element_access(&retyped, &sig.buffer_names());
            calls = t.calls;
            structs = t.structs;
            let cuda_bound = bound.as_ref().map(|(c, _)| c.as_str());
            (expand::kernel_function(&sig, &t.body, cuda_bound), t.headers)
        }
    };
    if !errors.is_empty() {
        let compile_errors = errors.to_compile_errors();
        let fallback = expand::fallback(&item, &krate);
        return quote!(#compile_errors #fallback);
    }
    for p in &sig.params {
        let ty = quote::ToTokens::to_token_stream(&p.ty).to_string();
        for (needle, h) in [("f16", "Fp16"), ("bf16", "Bf16")] {
            if ty.split(|c: char| !c.is_alphanumeric()).any(|w| w == needle) && !headers.contains(&h) {
                headers.push(h);
            }
        }
    }
    let def = expand::KernelDef {
        item: &item,
        cpu_block: &cpu_block,
        calls: &calls,
        structs: &structs,
        consts: &options.consts,
        launch_bound: bound.map(|(_, rust)| rust),
        sig: &sig,
        krate,
        kernel_source,
        headers,
        cooperative: mentions(body_tokens, intrinsics::COOPERATIVE),
    };
    expand::expand(&def)
}
