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
    /// `consts(N = [8, 16], …)`: the values of const generic parameters to register
    /// (for `precompile_all`, isolated devices and CI's NVRTC check), per parameter.
    pub(crate) consts: Vec<(syn::Ident, Vec<syn::Lit>)>,
    /// `launch_bounds = 256` or `launch_bounds = THREADS` (a const generic): the most
    /// threads a block of this kernel may have.
    pub(crate) launch_bounds: Option<LaunchBound>,
}

/// The bound of `launch_bounds = …`: what `__launch_bounds__` is given, and what every
/// launch's block is checked against before it is enqueued or emulated.
pub(crate) enum LaunchBound {
    /// A literal thread count.
    Threads(syn::LitInt),
    /// A const generic parameter of the kernel: the bound of each instantiation.
    Const(syn::Ident),
}

const KEYS: &str = "valid options: `cuda = \"…\"` (a raw CUDA C++ kernel), `crate = path`, \
                    `consts(N = [8, 16])` (the const generic values to register), \
                    `launch_bounds = 256` (the most threads a block may have)";

pub(crate) fn parse(args: TokenStream, errors: &mut Errors) -> Options {
    let mut o = Options::default();
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("cuda") {
            if o.cuda.is_some() {
                return Err(meta.error("`cuda` is set twice"));
            }
            o.cuda = Some(meta.value()?.parse()?);
        } else if meta.path.is_ident("consts") {
            if !o.consts.is_empty() {
                return Err(meta.error("`consts` is set twice"));
            }
            meta.parse_nested_meta(|inner| {
                let Some(name) = inner.path.get_ident().cloned() else {
                    return Err(inner.error("name a const generic parameter: `consts(N = [8, 16])`"));
                };
                let list: syn::ExprArray = inner.value()?.parse()?;
                let mut values = vec![];
                for e in &list.elems {
                    let lit = match e {
                        syn::Expr::Lit(l) if matches!(l.lit, syn::Lit::Int(_) | syn::Lit::Bool(_)) => {
                            Some(l.lit.clone())
                        }
                        // A negative integer: one literal with its sign.
                        syn::Expr::Unary(syn::ExprUnary {
                            op: syn::UnOp::Neg(_),
                            expr,
                            ..
                        }) => match &**expr {
                            syn::Expr::Lit(syn::ExprLit {
                                lit: syn::Lit::Int(i), ..
                            }) => Some(syn::Lit::Int(syn::LitInt::new(
                                &format!("-{}", i.base10_digits()),
                                i.span(),
                            ))),
                            _ => None,
                        },
                        _ => None,
                    };
                    match lit {
                        Some(l) => values.push(l),
                        None => {
                            return Err(syn::Error::new_spanned(
                                e,
                                "a const generic value is an integer or bool literal",
                            ))
                        }
                    }
                }
                if values.is_empty() {
                    return Err(syn::Error::new_spanned(list, "list at least one value: `N = [16]`"));
                }
                o.consts.push((name, values));
                Ok(())
            })?;
        } else if meta.path.is_ident("launch_bounds") {
            if o.launch_bounds.is_some() {
                return Err(meta.error("`launch_bounds` is set twice"));
            }
            let hint = "`launch_bounds` takes a thread count: `launch_bounds = 256`, or a const generic \
                        parameter of the kernel: `launch_bounds = THREADS`";
            let e: syn::Expr = meta.value()?.parse()?;
            o.launch_bounds = Some(match &e {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Int(i), ..
                }) => match i.base10_parse::<u32>() {
                    Ok(1..=1024) => LaunchBound::Threads(i.clone()),
                    _ => {
                        return Err(syn::Error::new_spanned(
                            i,
                            "a block has 1 to 1024 threads: give `launch_bounds` a count in that range",
                        ))
                    }
                },
                syn::Expr::Path(p) if p.path.get_ident().is_some() => {
                    LaunchBound::Const(p.path.get_ident().cloned().expect("checked"))
                }
                _ => return Err(syn::Error::new_spanned(e, hint)),
            });
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
