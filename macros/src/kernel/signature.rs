//! Parse: the kernel function's signature, checked against what a kernel can take.

use std::collections::BTreeMap;

use syn::spanned::Spanned;

use super::types::{Bound, Prim, Ty};
use crate::errors::Errors;

/// What a parameter is.
#[derive(Clone)]
pub(crate) enum ParamKind {
    /// A scalar by value (concrete or generic).
    Scalar(Ty),
    /// `&[T]` (read) or `&mut [T]` (written).
    Slice { elem: Ty, mutable: bool },
    /// A `#[derive(KernelArg)]` struct by value.
    Struct(syn::Path),
}

/// One parameter.
#[derive(Clone)]
pub(crate) struct Param {
    pub(crate) name: syn::Ident,
    pub(crate) ty: syn::Type,
    pub(crate) kind: ParamKind,
}

impl Param {
    /// The element type of a buffer parameter (`T` of `&[T]`); the type itself otherwise.
    pub(crate) fn elem(&self) -> syn::Type {
        match &self.ty {
            syn::Type::Reference(r) => match &*r.elem {
                syn::Type::Slice(s) => (*s.elem).clone(),
                other => other.clone(),
            },
            other => other.clone(),
        }
    }

    /// The parameter as the CPU emulation's Rust body takes it: buffers become the
    /// emulation's handles (`dsl` is the path of the runtime's `kernel::dsl`).
    pub(crate) fn cpu_param(&self, dsl: &proc_macro2::TokenStream) -> proc_macro2::TokenStream {
        let (n, ty, elem) = (&self.name, &self.ty, self.elem());
        match &self.kind {
            ParamKind::Slice { mutable: true, .. } => quote::quote!(mut #n: #dsl::slices::GlobalSliceMut<#elem>),
            ParamKind::Slice { mutable: false, .. } => quote::quote!(#n: #dsl::slices::GlobalSlice<#elem>),
            _ => quote::quote!(#n: #ty),
        }
    }
}

/// The checked signature.
#[derive(Clone)]
pub(crate) struct Signature {
    pub(crate) name: syn::Ident,
    /// Generic parameters in order, with their bound and the full bound list.
    pub(crate) generics: Vec<(syn::Ident, Bound, syn::TypeParam)>,
    /// Const generic parameters (after the type parameters), with their type.
    pub(crate) consts: Vec<(syn::Ident, Prim, syn::ConstParam)>,
    pub(crate) params: Vec<Param>,
    /// Parameters whose type was refused (already reported): the body's uses of them
    /// raise nothing more.
    pub(crate) rejected: Vec<syn::Ident>,
    /// What the function returns: `None` for a kernel; for a `#[device] fn`, its scalar
    /// type (`Some(Ty::Unit)` when it returns nothing).
    pub(crate) ret: Option<Ty>,
}

impl Signature {
    /// The names of the buffer parameters (`&[T]`, `&mut [T]`).
    pub(crate) fn buffer_names(&self) -> Vec<syn::Ident> {
        self.params
            .iter()
            .filter(|p| matches!(p.kind, ParamKind::Slice { .. }))
            .map(|p| p.name.clone())
            .collect()
    }
}

/// Which attribute the function carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// `#[kernel]`: an entry point, returns nothing.
    Kernel,
    /// `#[device]`: a helper kernels call, may return a scalar.
    DeviceFn,
}

impl Signature {
    pub(crate) fn generic_map(&self) -> BTreeMap<String, Bound> {
        self.generics.iter().map(|(i, b, _)| (i.to_string(), *b)).collect()
    }
}

const PARAM_HINT: &str = "a #[kernel] parameter is a scalar (f32 f64 f16 bf16 i8 … u64 usize isize bool), a \
                          generic `T: Float`/`T: Int`, a buffer `&[T]` (read) or `&mut [T]` (written), or a \
                          `#[derive(KernelArg)]` struct";

/// The scalar or generic type named by `ty`, if it is one.
pub(crate) fn scalar_type(ty: &syn::Type, generics: &BTreeMap<String, Bound>) -> Option<Ty> {
    let syn::Type::Path(p) = ty else { return None };
    if p.qself.is_some() || p.path.segments.len() != 1 {
        return None;
    }
    let seg = &p.path.segments[0];
    if !seg.arguments.is_none() {
        return None;
    }
    let name = seg.ident.to_string();
    if let Some(b) = generics.get(&name) {
        return Some(Ty::Generic(name, *b));
    }
    Prim::from_name(&name).map(Ty::Prim)
}

/// The checked signature of a `#[kernel]` or `#[device] fn`; every problem is reported
/// in `errors`, worded for the attribute the function carries.
pub(crate) fn parse(f: &syn::ItemFn, errors: &mut Errors, role: Role) -> Signature {
    let mut local = Errors::default();
    let sig = parse_as_kernel(f, &mut local, role);
    if let Some(all) = local.into_error() {
        for e in all {
            let msg = e.to_string();
            let msg = match role {
                Role::Kernel => msg,
                Role::DeviceFn => msg
                    .replace("a #[kernel]", "a #[device] fn")
                    .replace("#[kernel]", "#[device] fn"),
            };
            errors.push(syn::Error::new(e.span(), msg));
        }
    }
    sig
}

fn parse_as_kernel(f: &syn::ItemFn, errors: &mut Errors, role: Role) -> Signature {
    let sig = &f.sig;
    if let Some(a) = &sig.asyncness {
        errors.at(
            a,
            "a #[kernel] cannot be `async`: it runs on the GPU; its generated `launch` is async",
        );
    }
    if let Some(u) = &sig.unsafety {
        errors.at(
            u,
            "a #[kernel] cannot be `unsafe`: its launcher checks every argument; remove `unsafe`",
        );
    }
    if let Some(c) = &sig.constness {
        errors.at(c, "a #[kernel] cannot be `const`; remove `const`");
    }
    let name = sig.ident.to_string();
    if super::names::reserved(&name) {
        let why = if name.starts_with("k_") || name.starts_with("__") {
            "names starting with `k_` or `__` are reserved for the generated code's helpers".to_string()
        } else {
            format!("`{name}` is a C++ keyword there; rename it (e.g. `{name}_kernel`)")
        };
        errors.at(
            &sig.ident,
            format!("`{name}` cannot name a #[kernel]: the name is its CUDA C++ entry point, and {why}"),
        );
    }
    if let Some(abi) = &sig.abi {
        errors.at(
            abi,
            "a #[kernel] cannot declare an ABI; the macro emits the `extern \"C\"` entry point itself",
        );
    }
    let mut ret = None;
    if let syn::ReturnType::Type(_, ty) = &sig.output {
        if role == Role::Kernel {
            errors.at(
                ty,
                "a #[kernel] returns nothing: write results into a `&mut [T]` parameter instead \
                 (a `#[device] fn` helper may return a scalar)",
            );
        }
    }
    if let Some(w) = &sig.generics.where_clause {
        errors.at(
            w,
            "a #[kernel] takes its bounds inline (`<T: Float>`), not in a `where` clause",
        );
    }
    let mut generics = vec![];
    let mut consts = vec![];
    for g in &sig.generics.params {
        match g {
            syn::GenericParam::Type(tp) => {
                if !consts.is_empty() {
                    errors.at(
                        &tp.ident,
                        "put a #[kernel]'s type parameters before its const generics (`<T: Float, const N: usize>`)",
                    );
                }
                let mut bound = None;
                for b in &tp.bounds {
                    if let syn::TypeParamBound::Trait(t) = b {
                        let last = t.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default();
                        let this = match last.as_str() {
                            "Float" => Some(Bound::Float),
                            "Int" => Some(Bound::Int),
                            _ => None,
                        };
                        if let Some(this) = this {
                            if bound.is_some() {
                                errors.at(t, "a generic parameter takes one of `Float` or `Int`, not both");
                            }
                            bound = Some(this);
                        }
                    }
                }
                // Registered even when unbounded, so its uses raise no further errors.
                generics.push((tp.ident.clone(), bound.unwrap_or(Bound::Float), tp.clone()));
                match bound {
                    Some(_) => {}
                    None => errors.at(
                        &tp.ident,
                        format!(
                            "bound `{}` by `Float` (f32 f64 f16 bf16) or `Int` (i32 i64 u32 u64): a kernel is \
                             instantiated once per dtype its bound admits",
                            tp.ident
                        ),
                    ),
                }
            }
            syn::GenericParam::Lifetime(l) => errors.at(
                l,
                "a #[kernel] takes no lifetime parameters; remove it (buffers are `&[T]`)",
            ),
            syn::GenericParam::Const(c) if role == Role::DeviceFn => errors.at(
                c,
                "a #[device] fn takes no const generics; pass the value as a parameter",
            ),
            syn::GenericParam::Const(c) => match scalar_type(&c.ty, &BTreeMap::new()) {
                Some(Ty::Prim(p)) if !p.is_float() => consts.push((c.ident.clone(), p, c.clone())),
                _ => errors.at(
                    &c.ty,
                    "a #[kernel]'s const generic is an integer (usize, u32, i32 …) or a bool",
                ),
            },
        }
    }
    let gmap: BTreeMap<String, Bound> = generics.iter().map(|(i, b, _)| (i.to_string(), *b)).collect();
    let mut params = vec![];
    let mut rejected = vec![];
    for input in &sig.inputs {
        let syn::FnArg::Typed(pt) = input else {
            errors.at(input, "a #[kernel] is a free function: remove `self`");
            continue;
        };
        let name = match &*pt.pat {
            syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => pi.ident.clone(),
            other => {
                errors.at(
                    other,
                    "name each #[kernel] parameter with a plain identifier (no patterns)",
                );
                continue;
            }
        };
        let kind = match &*pt.ty {
            syn::Type::Reference(r) => {
                let elem = match &*r.elem {
                    syn::Type::Slice(s) => scalar_type(&s.elem, &gmap).filter(|t| t != &Ty::Prim(Prim::Bool)),
                    _ => None,
                };
                if let Some(l) = &r.lifetime {
                    errors.at(l, "a #[kernel] buffer takes no lifetime; write `&[T]` / `&mut [T]`");
                }
                match elem {
                    Some(elem) => ParamKind::Slice {
                        elem,
                        mutable: r.mutability.is_some(),
                    },
                    None => {
                        errors.at(
                            &r.elem,
                            format!(
                                "a #[kernel] buffer is a slice of a dtype: `&[T]` or `&mut [T]` with T one of \
                                 f32 f64 f16 bf16 i8 … u64 or a generic parameter; {PARAM_HINT}"
                            ),
                        );
                        rejected.push(name);
                        continue;
                    }
                }
            }
            ty => match scalar_type(ty, &gmap) {
                Some(t) => ParamKind::Scalar(t),
                None => match ty {
                    syn::Type::Path(p)
                        if p.qself.is_none()
                            && p.path.segments.last().is_some_and(|s| s.arguments.is_none())
                            && p.path.segments.last().is_some_and(|s| {
                                s.ident.to_string().chars().next().is_some_and(char::is_uppercase)
                            }) =>
                    {
                        ParamKind::Struct(p.path.clone())
                    }
                    other => {
                        let vector = matches!(other, syn::Type::Path(p)
                            if p.path.segments.last().is_some_and(|s| s.ident == "Vec4" || s.ident == "Vec2"));
                        let msg = match vector {
                            true => format!(
                                "{PARAM_HINT}; a `Vec4`/`Vec2` is a value of the body: pass its lanes as \
                                 scalars, or the buffer and read it with `x.load4(i)`"
                            ),
                            false => PARAM_HINT.to_string(),
                        };
                        errors.push(syn::Error::new(other.span(), msg));
                        rejected.push(name);
                        continue;
                    }
                },
            },
        };
        params.push(Param {
            name,
            ty: (*pt.ty).clone(),
            kind,
        });
    }
    if role == Role::DeviceFn {
        ret = Some(match &sig.output {
            syn::ReturnType::Default => Ty::Unit,
            syn::ReturnType::Type(_, ty) => match scalar_type(ty, &gmap) {
                Some(t) => t,
                None => {
                    errors.at(
                        ty,
                        "a #[device] fn returns a scalar (f32 f64 f16 bf16 i8 … u64 usize isize bool or a \
                         generic parameter) or nothing",
                    );
                    Ty::Unit
                }
            },
        });
    }
    Signature {
        name: sig.ident.clone(),
        generics,
        consts,
        params,
        rejected,
        ret,
    }
}
