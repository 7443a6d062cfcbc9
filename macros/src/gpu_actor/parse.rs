//! From the user's `impl` block to an `ActorDef`: handlers, hooks, options.

use proc_macro2::Span;
use quote::format_ident;
use syn::spanned::Spanned;
use syn::{
    Attribute, FnArg, GenericParam, Ident, ImplItem, ImplItemFn, ItemImpl, Pat, ReturnType, Type, TypeParamBound,
};

use super::options::Options;
use crate::errors::Errors;

/// What a handler returns.
pub(crate) enum Ret {
    /// Nothing: the reply is `Ok(())`.
    Unit,
    /// A plain value `T`: the reply is `Ok(value)`.
    Plain(Type),
    /// `Result<T, GpuError>`: passed through; the payload type is `T`.
    Result(Type),
    /// `Deferred<T>` or `Result<Deferred<T>, GpuError>`: the reply is sent when the
    /// deferred value resolves; the payload type is `T`.
    Deferred { inner: Type, fallible: bool },
}

/// One `#[handler]` method.
pub(crate) struct Handler {
    pub(crate) method: Ident,
    pub(crate) docs: Vec<Attribute>,
    /// The handler's `#[allow(..)]` attributes, repeated on the methods generated from
    /// it: a `Device` or `ActorGpu` method takes the handler's arguments, so what a
    /// handler allows (too many arguments) its twins need too. Only `allow`: an
    /// `expect` could go unfulfilled on a generated method.
    pub(crate) allows: Vec<Attribute>,
    pub(crate) is_async: bool,
    pub(crate) takes_ctx: bool,
    pub(crate) args: Vec<(Ident, Type)>,
    pub(crate) ret: Ret,
    pub(crate) tell: bool,
    /// `#[handler(volatile)]`: the answer reports the device's state (free memory, a
    /// cache hit), not a result, so a replay does not compare it bit for bit.
    pub(crate) volatile: bool,
    /// The type parameter of a generic handler and its bounds.
    pub(crate) generic: Option<(Ident, Vec<TypeParamBound>)>,
    /// The concrete dtypes of a generic handler, as written.
    pub(crate) dtypes: Vec<Type>,
    /// The dtype set names as written (`dtypes(blas1)` → `[blas1]`), empty when the
    /// dtypes are listed one by one.
    pub(crate) dtype_sets: Vec<Ident>,
    /// `#[handler(device)]`: the name of the `Device` method this handler becomes, and
    /// where `device` was written (what errors about it point at).
    pub(crate) device: Option<(Ident, Span)>,
    /// `device(borrow(shape))`: parameters (besides `GpuRef`s) the `Device` method
    /// takes by reference and clones.
    pub(crate) borrow: Vec<Ident>,
    /// `device(into(data))`: parameters the `Device` method takes as `impl Into<T>` of
    /// the handler's type `T` and converts (an upload takes a `Vec` or a slice).
    pub(crate) into: Vec<Ident>,
    /// `device(internal)`: the `Device` method is `pub(crate)` — the runtime's own
    /// building block behind a hand-written public method (a copy that stages large
    /// transfers through pinned buffers and sends small ones as one message).
    pub(crate) internal: bool,
    /// Where to point errors about the handler as a whole.
    pub(crate) span: Span,
}

impl Handler {
    /// The message variant of this handler for `dtype` (None: not generic).
    pub(crate) fn variant(&self, dtype: Option<&Type>) -> Ident {
        let base = upper_camel(&self.method.to_string());
        match dtype {
            None => Ident::new(&base, self.method.span()),
            Some(t) => format_ident!("{}{}", base, upper_camel(&type_suffix(t)), span = t.span()),
        }
    }
}

impl Handler {
    /// The instances of the handler: one per dtype, or one (not generic).
    pub(crate) fn instances(&self) -> Vec<Option<&Type>> {
        if self.generic.is_some() {
            self.dtypes.iter().map(Some).collect()
        } else {
            vec![None]
        }
    }

    /// The reply payload type (`T` of `Result<T, GpuError>`).
    pub(crate) fn payload(&self) -> Type {
        match &self.ret {
            Ret::Unit => syn::parse_quote!(()),
            Ret::Plain(t) | Ret::Result(t) => t.clone(),
            Ret::Deferred { inner, .. } => inner.clone(),
        }
    }
}

impl ActorDef {
    /// The generated message enum and typed client: `<Name>Msg`, `<Name>Ref`.
    pub(crate) fn names(&self) -> (Ident, Ident) {
        (format_ident!("{}Msg", self.name), format_ident!("{}Ref", self.name))
    }

    /// The dtype-mapping trait of generic handler `h`: `<Name><Handler>DType`.
    pub(crate) fn dtype_trait_name(&self, h: &Handler) -> Ident {
        format_ident!("{}{}DType", self.name, h.variant(None))
    }
}

/// A lifecycle hook method.
pub(crate) struct Hook {
    pub(crate) method: Ident,
    pub(crate) span: Span,
}

/// Everything the expander needs.
pub(crate) struct ActorDef {
    pub(crate) self_ty: Type,
    pub(crate) name: Ident,
    pub(crate) options: Options,
    pub(crate) handlers: Vec<Handler>,
    pub(crate) pre_start: Vec<Hook>,
    pub(crate) post_stop: Vec<Hook>,
    pub(crate) pre_restart: Vec<Hook>,
    /// Methods marked `#[handler]`, valid or not.
    pub(crate) marked_handlers: usize,
    /// The user's impl with our marker attributes removed.
    pub(crate) item: ItemImpl,
}

fn upper_camel(s: &str) -> String {
    s.split('_')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect::<String>())
                .unwrap_or_default()
        })
        .collect()
}

fn type_suffix(t: &Type) -> String {
    if let Type::Path(p) = t {
        if let Some(seg) = p.path.segments.last() {
            if seg.arguments.is_empty() {
                return seg.ident.to_string();
            }
        }
    }
    quote::quote!(#t).to_string().replace(' ', "").replace("::", "_")
}

fn is_marker(a: &Attribute, name: &str) -> bool {
    a.path().is_ident(name)
}

/// `&mut Context<Self>` (or any `&mut …::Context<…>`).
fn is_ctx(ty: &Type) -> bool {
    match ty {
        Type::Reference(r) if r.mutability.is_some() => match &*r.elem {
            Type::Path(p) => p.path.segments.last().is_some_and(|s| s.ident == "Context"),
            _ => false,
        },
        _ => false,
    }
}

/// `Deferred<X>` → `X`.
fn deferred_inner(ty: &Type) -> Option<Type> {
    let Type::Path(p) = ty else { return None };
    let seg = p.path.segments.last()?;
    if seg.ident != "Deferred" {
        return None;
    }
    match &seg.arguments {
        syn::PathArguments::AngleBracketed(a) => match a.args.first() {
            Some(syn::GenericArgument::Type(t)) => Some(t.clone()),
            _ => None,
        },
        _ => None,
    }
}

fn parse_ret(ret: &ReturnType) -> Ret {
    match parse_plain_ret(ret) {
        Ret::Result(ok) => match deferred_inner(&ok) {
            Some(inner) => Ret::Deferred { inner, fallible: true },
            None => Ret::Result(ok),
        },
        Ret::Plain(t) => match deferred_inner(&t) {
            Some(inner) => Ret::Deferred { inner, fallible: false },
            None => Ret::Plain(t),
        },
        other => other,
    }
}

fn parse_plain_ret(ret: &ReturnType) -> Ret {
    match ret {
        ReturnType::Default => Ret::Unit,
        ReturnType::Type(_, ty) => {
            if let Type::Tuple(t) = &**ty {
                if t.elems.is_empty() {
                    return Ret::Unit;
                }
            }
            if let Type::Path(p) = &**ty {
                if let Some(seg) = p.path.segments.last() {
                    if seg.ident == "Result" {
                        if let syn::PathArguments::AngleBracketed(a) = &seg.arguments {
                            if let Some(syn::GenericArgument::Type(ok)) = a.args.first() {
                                return Ret::Result(ok.clone());
                            }
                        }
                    }
                }
            }
            Ret::Plain((**ty).clone())
        }
    }
}

/// Whether `id` names a dtype set of [`expand_set`].
fn is_set_name(id: Option<&Ident>) -> bool {
    id.is_some_and(|i| SETS.iter().any(|(n, _)| i == n))
}

/// Named dtype sets: `all` (every real element type, FP8 included), `float` (f16, bf16, f32, f64),
/// `blas1` (f32, f64), `int` (signed and unsigned integers), `complex` (c32, c64), `any`
/// (every element type: `all` and `complex`). The one list of them: the runtime's public
/// bounds name the mapping trait generated per set (`BlasActorBlas1`), and the device tier
/// gives each set its public bound when it expands an actor's device surface.
const SETS: &[(&str, &[&str])] = &[
    (
        "all",
        &[
            "f16", "bf16", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f8e4m3", "f8e5m2",
        ],
    ),
    ("float", &["f16", "bf16", "f32", "f64"]),
    ("blas1", &["f32", "f64"]),
    ("int", &["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"]),
    ("complex", &["c32", "c64"]),
    (
        "any",
        &[
            "f16", "bf16", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f8e4m3", "f8e5m2",
            "c32", "c64",
        ],
    ),
];

/// Parses `#[handler(...)]`'s arguments: `tell`, `dtypes(...)`, `device`.
/// A named dtype set ([`SETS`]) as its dtypes; other types stay as written.
fn expand_set(t: Type, krate: &syn::Path) -> Vec<Type> {
    let Type::Path(p) = &t else { return vec![t] };
    let Some(id) = p.path.get_ident() else { return vec![t] };
    let Some((_, names)) = SETS.iter().find(|(n, _)| id == n) else {
        return vec![t];
    };
    let span = id.span();
    names
        .iter()
        .map(|n| {
            let ident = Ident::new(n, span);
            let ty = if *n == "f16" || *n == "bf16" {
                quote::quote_spanned!(span=> #krate::__private::half::#ident)
            } else if matches!(*n, "c32" | "c64" | "f8e4m3" | "f8e5m2") {
                quote::quote_spanned!(span=> #krate::dtype::#ident)
            } else {
                quote::quote_spanned!(span=> #ident)
            };
            syn::parse2(ty).expect("a dtype path")
        })
        .collect()
}

/// What `#[handler(...)]` says.
#[derive(Default)]
struct HandlerAttr {
    tell: bool,
    volatile: bool,
    dtypes: Vec<Type>,
    dtypes_span: Option<Span>,
    /// Named sets among the dtypes, when every entry is one.
    sets: Vec<Ident>,
    device: Option<(Ident, Span)>,
    borrow: Vec<Ident>,
    into: Vec<Ident>,
    internal: bool,
}

fn parse_handler_attr(attr: &Attribute, method: &Ident, krate: &syn::Path, errors: &mut Errors) -> HandlerAttr {
    let mut a = HandlerAttr::default();
    if matches!(attr.meta, syn::Meta::Path(_)) {
        return a;
    }
    let HandlerAttr {
        tell,
        volatile,
        dtypes,
        dtypes_span,
        sets,
        device,
        borrow,
        into,
        internal,
    } = &mut a;
    let mut seen: Vec<String> = vec![];
    let r = attr.parse_nested_meta(|meta| {
        let key = meta.path.get_ident().map(|i| i.to_string()).unwrap_or_default();
        if seen.contains(&key) {
            errors.at(&meta.path, format!("`{key}` is set twice; keep one"));
        }
        seen.push(key);
        if meta.path.is_ident("tell") {
            *tell = true;
        } else if meta.path.is_ident("volatile") {
            *volatile = true;
        } else if meta.path.is_ident("device") {
            let mut name = method.clone();
            if meta.input.peek(syn::token::Paren) {
                meta.parse_nested_meta(|sub| {
                    if sub.path.is_ident("name") {
                        name = sub.value()?.parse()?;
                    } else if sub.path.is_ident("borrow") {
                        let content;
                        syn::parenthesized!(content in sub.input);
                        borrow.extend(content.parse_terminated(Ident::parse, syn::Token![,])?);
                    } else if sub.path.is_ident("into") {
                        let content;
                        syn::parenthesized!(content in sub.input);
                        into.extend(content.parse_terminated(Ident::parse, syn::Token![,])?);
                    } else if sub.path.is_ident("internal") {
                        *internal = true;
                    } else {
                        errors.at(
                            &sub.path,
                            "unknown `device` key; expected `name = method_name`, `borrow(param, …)`, `into(param, …)` or `internal`",
                        );
                        if sub.input.peek(syn::Token![=]) {
                            let _: syn::Expr = sub.value()?.parse()?;
                        }
                    }
                    Ok(())
                })?;
            }
            *device = Some((name, meta.path.span()));
        } else if meta.path.is_ident("dtypes") {
            *dtypes_span = Some(meta.path.span());
            let content;
            syn::parenthesized!(content in meta.input);
            let written: Vec<Type> = content
                .parse_terminated(Type::parse, syn::Token![,])?
                .into_iter()
                .collect();
            let named: Vec<Ident> = written
                .iter()
                .filter_map(|t| match t {
                    Type::Path(p) if is_set_name(p.path.get_ident()) => p.path.get_ident().cloned(),
                    _ => None,
                })
                .collect();
            if named.len() == written.len() {
                *sets = named;
            }
            *dtypes = written.into_iter().flat_map(|t| expand_set(t, krate)).collect();
            if dtypes.is_empty() {
                errors.at(
                    &meta.path,
                    "`dtypes()` is empty: list the element types, e.g. `dtypes(f32, f64)`",
                );
            }
        } else {
            errors.at(
                &meta.path,
                "unknown #[handler] key; expected `tell`, `dtypes(...)`, `device` or `volatile`",
            );
            if meta.input.peek(syn::token::Paren) {
                let content;
                syn::parenthesized!(content in meta.input);
                let _: proc_macro2::TokenStream = content.parse()?;
            }
        }
        Ok(())
    });
    if let Err(e) = r {
        errors.push(e);
    }
    a
}

use syn::parse::Parse;

fn parse_handler(f: &ImplItemFn, attr: &Attribute, krate: &syn::Path, errors: &mut Errors) -> Option<Handler> {
    let HandlerAttr {
        tell,
        volatile,
        dtypes,
        dtypes_span,
        sets: dtype_sets,
        device,
        borrow,
        into,
        internal,
    } = parse_handler_attr(attr, &f.sig.ident, krate, errors);
    let sig = &f.sig;
    let mut ok = true;
    match sig.inputs.first() {
        Some(FnArg::Receiver(r)) => {
            if r.reference.is_none() {
                errors.at(
                    r,
                    "a handler takes `&mut self` (or `&self`): `self` by value would consume the actor; write `&mut self`",
                );
                ok = false;
            }
        }
        _ => {
            errors.at(
                &sig.ident,
                "#[handler] marks methods of the actor: add `&mut self` (or `&self`) as the first parameter",
            );
            ok = false;
        }
    }
    let mut takes_ctx = false;
    let mut args = vec![];
    for (i, input) in sig.inputs.iter().enumerate().skip(1) {
        let FnArg::Typed(pt) = input else { continue };
        if is_ctx(&pt.ty) {
            if i != 1 || takes_ctx {
                errors.at(
                    &pt.ty,
                    "the actor context must come right after `self`: `(&mut self, ctx: &mut Context<Self>, …)`",
                );
                ok = false;
            }
            takes_ctx = true;
            continue;
        }
        match &*pt.pat {
            Pat::Ident(p) => args.push((p.ident.clone(), (*pt.ty).clone())),
            other => {
                errors.at(
                    other,
                    "handler parameters need plain names (they become message fields): write `name: Type`",
                );
                ok = false;
            }
        }
        if let Type::Reference(r) = &*pt.ty {
            errors.at(
                r,
                "handler parameters travel in messages and must be owned: take `Vec<T>`/`GpuRef<T>`/… instead of a reference",
            );
            ok = false;
        }
    }
    let mut type_params = sig.generics.params.iter().filter_map(|p| match p {
        GenericParam::Type(t) => Some(t),
        _ => None,
    });
    let generic = type_params.next().map(|t| {
        let mut bounds: Vec<TypeParamBound> = t.bounds.iter().cloned().collect();
        if let Some(w) = &sig.generics.where_clause {
            for pred in &w.predicates {
                if let syn::WherePredicate::Type(pt) = pred {
                    if matches!(&pt.bounded_ty, Type::Path(p) if p.path.is_ident(&t.ident)) {
                        bounds.extend(pt.bounds.iter().cloned());
                    }
                }
            }
        }
        (t.ident.clone(), bounds)
    });
    if let Some(extra) = type_params.next() {
        errors.at(
            extra,
            "a handler may have one type parameter (the dtype); split this handler",
        );
        ok = false;
    }
    if sig
        .generics
        .params
        .iter()
        .any(|p| matches!(p, GenericParam::Lifetime(_) | GenericParam::Const(_)))
    {
        errors.at(
            &sig.generics,
            "handlers cannot have lifetime or const parameters: messages own their data",
        );
        ok = false;
    }
    match (&generic, dtypes.is_empty()) {
        (Some((t, _)), true) => {
            errors.at(
                &sig.generics,
                format!(
                    "generic handler `{}<{t}>` needs its dtypes: write `#[handler(dtypes(f32, f64))]` with the types to generate",
                    sig.ident
                ),
            );
            ok = false;
        }
        (None, false) => {
            errors.push(syn::Error::new(
                dtypes_span.unwrap_or_else(|| attr.span()),
                format!(
                    "`dtypes(...)` applies to generic handlers only: declare the type parameter, e.g. `fn {}<T: …>`",
                    sig.ident
                ),
            ));
            ok = false;
        }
        _ => {}
    }
    let ret = parse_ret(&sig.output);
    if tell {
        let unit_ok = match &ret {
            Ret::Unit => true,
            Ret::Result(t) => matches!(t, Type::Tuple(tt) if tt.elems.is_empty()),
            Ret::Plain(_) | Ret::Deferred { .. } => false,
        };
        if !unit_ok {
            errors.at(
                &sig.output,
                "a `tell` handler has no reply: return nothing or `Result<(), GpuError>` (an error goes to the supervisor)",
            );
            ok = false;
        }
    }
    let docs = f.attrs.iter().filter(|a| a.path().is_ident("doc")).cloned().collect();
    let allows = f.attrs.iter().filter(|a| a.path().is_ident("allow")).cloned().collect();
    ok.then(|| Handler {
        method: sig.ident.clone(),
        docs,
        allows,
        is_async: sig.asyncness.is_some(),
        takes_ctx,
        args,
        ret,
        tell,
        volatile,
        generic,
        dtypes,
        dtype_sets,
        device,
        borrow,
        into,
        internal,
        span: sig.ident.span(),
    })
}

/// Parses the impl; records problems in `errors`.
pub(crate) fn parse(mut item: ItemImpl, options: Options, errors: &mut Errors) -> ActorDef {
    if let Some((_, path, _)) = &item.trait_ {
        errors.at(
            path,
            "#[gpu_actor] goes on an inherent `impl MyActor { … }`, not on a trait impl",
        );
    }
    if !item.generics.params.is_empty() {
        errors.at(
            &item.generics,
            "#[gpu_actor] actors cannot be generic; make the handlers generic with `dtypes(...)`",
        );
    }
    let name = match &*item.self_ty {
        Type::Path(p) => p.path.segments.last().map(|s| s.ident.clone()),
        _ => None,
    }
    .unwrap_or_else(|| {
        errors.at(&item.self_ty, "#[gpu_actor] needs a named type: `impl MyActor { … }`");
        Ident::new("Actor", Span::call_site())
    });
    let mut handlers = vec![];
    let mut pre_start = vec![];
    let mut post_stop = vec![];
    let mut pre_restart = vec![];
    let mut marked_handlers = 0;
    let krate = crate::crate_path::runtime_path(options.krate.as_ref());
    for it in &mut item.items {
        let ImplItem::Fn(f) = it else { continue };
        let mut markers = vec![];
        f.attrs.retain(|a| {
            let m = ["handler", "pre_start", "post_stop", "pre_restart"]
                .iter()
                .any(|n| is_marker(a, n));
            if m {
                markers.push(a.clone());
            }
            !m
        });
        for (i, attr) in markers.iter().enumerate() {
            if i > 0 {
                errors.at(
                    attr,
                    "one marker per method: #[handler], #[pre_start] and #[post_stop] exclude each other",
                );
                continue;
            }
            if attr.path().is_ident("handler") {
                marked_handlers += 1;
                if let Some(h) = parse_handler(f, attr, &krate, errors) {
                    handlers.push(h);
                }
            } else {
                let hook = Hook {
                    method: f.sig.ident.clone(),
                    span: f.sig.ident.span(),
                };
                let restart = attr.path().is_ident("pre_restart");
                let ok_sig = f.sig.asyncness.is_some()
                    && f.sig.inputs.len() == if restart { 3 } else { 2 }
                    && matches!(f.sig.inputs.first(), Some(FnArg::Receiver(r)) if r.mutability.is_some() && r.reference.is_some())
                    && matches!(f.sig.inputs.iter().nth(1), Some(FnArg::Typed(t)) if is_ctx(&t.ty));
                if !ok_sig {
                    errors.at(
                        &f.sig,
                        if restart {
                            "#[pre_restart] marks `async fn name(&mut self, ctx: &mut Context<Self>, failure: &Failure) -> Result<(), GpuError>`"
                        } else {
                            "a lifecycle hook is `async fn name(&mut self, ctx: &mut Context<Self>) -> Result<(), GpuError>`"
                        },
                    );
                } else if attr.path().is_ident("pre_start") {
                    pre_start.push(hook);
                } else if restart {
                    pre_restart.push(hook);
                } else {
                    post_stop.push(hook);
                }
            }
        }
    }
    ActorDef {
        self_ty: (*item.self_ty).clone(),
        name,
        options,
        handlers,
        pre_start,
        post_stop,
        pre_restart,
        marked_handlers,
        item,
    }
}
