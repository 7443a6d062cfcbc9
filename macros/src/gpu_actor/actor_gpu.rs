//! What `#[gpu_actor(device)]` generates so that an actor's own GPU (`ActorGpu`: a stream
//! and library handles of one actor) offers the library actor's operations without a
//! message: a direct-call shim per `#[handler(device)]` (the handler run in place, its
//! answer as a `Deferred`), and a `<actor>_actor_gpu_surface!` macro that writes the
//! `ActorGpu` method of each — the same name, arguments and docs as the `Device` method,
//! enqueued on the actor's own stream, or sent to the device when the device is not in
//! this process.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::Ident;

use super::device::{device_sets, method_args, snake, surface_macro, MethodArgs};
use super::parse::{ActorDef, Handler, Ret};

/// `gemm` → `__direct_gemm`.
pub(crate) fn shim_name(h: &Handler) -> Ident {
    format_ident!("__direct_{}", h.method)
}

/// Whether handler `h` can run in place: a `#[handler(device)]` that is synchronous and
/// needs no actor context (every library operation is so: it enqueues and returns a
/// `Deferred`).
pub(crate) fn direct(h: &Handler) -> bool {
    h.device.is_some() && !h.is_async && !h.takes_ctx
}

/// The shims: `fn __direct_<handler>` runs the handler on this value and answers
/// `Result<Deferred<R>, GpuError>` whatever the handler's own return shape — or, for an
/// actor built without its cargo feature (`off`), answers `Unsupported` naming it.
pub(crate) fn shims(def: &ActorDef, krate: &syn::Path, off: Option<&syn::LitStr>) -> TokenStream {
    if def.options.device.is_none() {
        return quote!();
    }
    let self_ty = &def.self_ty;
    let fns = def.handlers.iter().filter(|h| direct(h)).map(|h| {
        let method = &h.method;
        let shim = shim_name(h);
        let p = h.payload();
        let args = h.args.iter().map(|(n, t)| quote!(#n: #t));
        let fields = h.args.iter().map(|(n, _)| n);
        let (generics, turbofish) = match &h.generic {
            Some((param, bounds)) => (quote!(<#param: #(#bounds)+*>), quote!(::<#param>)),
            None => (quote!(), quote!()),
        };
        let invoke = quote!(self.#method #turbofish(#(#fields),*));
        let now = quote!(#krate::actor::Deferred::Now);
        let body = match &h.ret {
            _ if off.is_some() => {
                let error = super::expand::without_feature(def, krate, off.expect("checked"));
                quote!(::core::result::Result::Err(#error))
            }
            Ret::Unit => quote!({ #invoke; ::core::result::Result::Ok(#now(())) }),
            Ret::Plain(_) => quote!(::core::result::Result::Ok(#now(#invoke))),
            Ret::Result(_) => quote!(#invoke.map(#now)),
            Ret::Deferred { fallible: true, .. } => quote!(#invoke),
            Ret::Deferred { fallible: false, .. } => quote!(::core::result::Result::Ok(#invoke)),
        };
        let allows = &h.allows;
        quote! {
            #[doc(hidden)]
            #[allow(dead_code, unused_variables)]
            #(#allows)*
            pub(crate) fn #shim #generics(&mut self, #(#args),*)
                -> ::core::result::Result<#krate::actor::Deferred<#p>, #krate::GpuError> {
                #body
            }
        }
    });
    let serve = serve(def, krate);
    quote! {
        impl #self_ty {
            #(#fns)*
            #serve
        }
    }
}

/// `fn __serve`: a request message answered by running its handler in place (through
/// its shim) — what an isolated device's worker does with the requests of one user
/// actor's `ActorGpu`, on that actor's own stream there. Answers `Ok` with the reply
/// still to come (`Some`: a future that sends it), or gives back a message of a handler
/// that does not run in place.
fn serve(def: &ActorDef, krate: &syn::Path) -> TokenStream {
    let (msg, _) = def.names();
    let arms = def.handlers.iter().filter(|h| direct(h) && !h.tell).flat_map(|h| {
        let shim = shim_name(h);
        let msg = &msg;
        h.instances().into_iter().map(move |d| {
            let v = h.variant(d);
            let fields: Vec<&Ident> = h.args.iter().map(|(n, _)| n).collect();
            let turbofish = d.map(|t| quote!(::<#t>));
            quote! {
                #msg::#v { #(#fields,)* reply } => match self.#shim #turbofish(#(#fields),*) {
                    ::core::result::Result::Ok(#krate::actor::Deferred::Now(v)) => {
                        reply.send(::core::result::Result::Ok(v));
                        ::core::result::Result::Ok(::core::option::Option::None)
                    }
                    ::core::result::Result::Ok(#krate::actor::Deferred::Later(fut)) => {
                        ::core::result::Result::Ok(::core::option::Option::Some(::std::boxed::Box::pin(async move {
                            reply.send(fut.await);
                        })))
                    }
                    ::core::result::Result::Err(e) => {
                        reply.send(::core::result::Result::Err(e));
                        ::core::result::Result::Ok(::core::option::Option::None)
                    }
                },
            }
        })
    });
    quote! {
        #[doc(hidden)]
        #[allow(dead_code, unreachable_patterns)]
        pub(crate) fn __serve(
            &mut self,
            msg: #msg,
        ) -> ::core::result::Result<
            ::core::option::Option<::core::pin::Pin<::std::boxed::Box<dyn ::core::future::Future<Output = ()> + ::core::marker::Send>>>,
            #msg,
        > {
            match msg {
                #(#arms)*
                other => ::core::result::Result::Err(other),
            }
        }
    }
}

/// The name of the macro that writes an actor's `ActorGpu` methods:
/// `BlasActor` → `blas_actor_actor_gpu_surface`.
fn surface_macro_name(def: &ActorDef) -> Ident {
    format_ident!("{}_actor_gpu_surface", snake(&def.name.to_string()))
}

/// A `macro_rules!` writing `impl ActorGpu { … }`, one method per direct handler, for the
/// device tier to expand: `<actor>_actor_gpu_surface!(crate::library::blas, via = blas;
/// float = BlasScalar, …)` names the actor's module, the `ActorGpu` accessor of the actor's in-place instance and the public bound of
/// each dtype set. Each method runs the handler on the actor's own stream when the device
/// is in this process, else it is the `Device` method of the same name.
pub(crate) fn surface(def: &ActorDef, krate: &syn::Path) -> TokenStream {
    if def.options.device.is_none() {
        return quote!();
    }
    let sets = device_sets(def);
    let methods = def.handlers.iter().filter(|h| direct(h)).filter_map(|h| {
        let (name, _) = h.device.as_ref()?;
        let (docs, allows) = (&h.docs, &h.allows);
        let p = h.payload();
        let shim = shim_name(h);
        let MethodArgs { decls, clones, fields } = method_args(h);
        let span = name.span();
        let (generics, turbofish) = match &h.generic {
            Some((param, _)) => {
                let set = h.dtype_sets.first()?;
                (quote!(<#param: $#set>), quote!(::<#param>))
            }
            None => (quote!(), quote!()),
        };
        Some(quote_spanned! {span=>
            #(#docs)*
            ///
            /// On this actor's own stream, with its own library handle (see [`ActorGpu`]).
            #(#allows)*
            pub async fn #name #generics(&self, #(#decls),*) -> ::core::result::Result<#p, #krate::GpuError> {
                // The guard of the in-place actors lives in this block only: held while
                // the call enqueues, never across the wait. Not in place: the `Device`
                // method's request, made here and awaited below.
                let work = {
                    match self.local()? {
                        ::core::option::Option::Some(mut local) => {
                            #(#clones)*
                            ::core::result::Result::Ok(local.$via()?.#shim #turbofish(#(#fields),*)?)
                        }
                        // Boxed: this path is rare (an isolated device, one starting or
                        // journalled), and the `Device` request's future held inline
                        // made every call's future ~8 KiB, which a caller keeping many
                        // in flight moves and allocates per call.
                        ::core::option::Option::None => ::core::result::Result::Err(::std::boxed::Box::pin(
                            #krate::device::Device::#name #turbofish(self.device(), #(#fields),*)
                        )),
                    }
                };
                match work {
                    ::core::result::Result::Ok(deferred) => {
                        // In flight on the device (what placement balances) until done.
                        let _counted = self.device().counted();
                        deferred.resolve().await
                    }
                    // Marked as this actor's: an isolated device's worker serves it on a
                    // stream of this actor's own.
                    ::core::result::Result::Err(request) => self.as_origin(request).await,
                }
            }
        })
    });
    let name = surface_macro_name(def);
    let target = quote!(#krate::device::ActorGpu);
    let arms = [(quote!($($m:ident)::+, via = $via:ident), methods.collect())];
    surface_macro(def, &name, &arms, &sets, target)
}
