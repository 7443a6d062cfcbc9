//! Expand: the module a `#[kernel]` function becomes.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use super::signature::{ParamKind, Signature};
use super::translate::cuda_params;
use super::types::Prim;

/// Everything expansion needs, proven by parse and validate.
pub(crate) struct KernelDef<'a> {
    pub(crate) item: &'a syn::ItemFn,
    /// The body the CPU emulation runs (the item's, with index intrinsics cast to the
    /// integer type the translation gave them).
    pub(crate) cpu_block: &'a syn::Block,
    /// The `#[device] fn`s the body calls.
    pub(crate) calls: &'a [syn::Path],
    /// `#[derive(KernelArg)]` structs the body builds or declares.
    pub(crate) structs: &'a [syn::Path],
    /// The `consts(…)` option: const generic values to register.
    pub(crate) consts: &'a [(syn::Ident, Vec<syn::Lit>)],
    /// `launch_bounds = …` as the launcher computes it (a literal or a const generic).
    pub(crate) launch_bound: Option<TokenStream>,
    pub(crate) sig: &'a Signature,
    pub(crate) krate: syn::Path,
    /// The `extern "C"` kernel (translated, or the raw option's text).
    pub(crate) kernel_source: String,
    pub(crate) headers: Vec<&'static str>,
    pub(crate) cooperative: bool,
}

/// The translated kernel function around its body, with `__launch_bounds__(bound)` when
/// the kernel declares one.
pub(crate) fn kernel_function(sig: &Signature, body: &str, bound: Option<&str>) -> String {
    let params: Vec<String> = cuda_params(sig)
        .into_iter()
        .map(|(t, n)| {
            if t.ends_with('*') {
                format!("{t} __restrict__ {n}")
            } else {
                format!("{t} {n}")
            }
        })
        .collect();
    let bounds = bound.map(|b| format!("__launch_bounds__({b}) ")).unwrap_or_default();
    format!(
        "extern \"C\" __global__ void {bounds}{}({}) {{\n{body}}}\n",
        sig.name,
        params.join(", ")
    )
}

/// The dtype's path in generated code (half types through the runtime's re-export).
fn dtype_path(krate: &syn::Path, d: &str) -> TokenStream {
    let i = format_ident!("{}", d);
    if d == "f16" || d == "bf16" {
        quote!(#krate::__private::half::#i)
    } else {
        quote!(#i)
    }
}

/// Every binding of the generic parameters to the dtypes their bounds admit, and of the
/// const generics to the values `consts(…)` lists: `(dtypes, const values)`. None when a
/// const generic has no listed values (such a kernel compiles at its first launch).
fn instances(sig: &Signature, consts: &[(syn::Ident, Vec<syn::Lit>)]) -> Vec<(Vec<&'static str>, Vec<syn::Lit>)> {
    let mut all = vec![(vec![], vec![])];
    for (_, b, _) in &sig.generics {
        all = all
            .into_iter()
            .flat_map(|(prefix, c): (Vec<&'static str>, Vec<syn::Lit>)| {
                b.dtypes().iter().map(move |d| {
                    let mut v = prefix.clone();
                    v.push(*d);
                    (v, c.clone())
                })
            })
            .collect();
    }
    for (ident, _, _) in &sig.consts {
        let Some((_, values)) = consts.iter().find(|(n, _)| n == ident) else {
            return vec![];
        };
        all = all
            .into_iter()
            .flat_map(|(d, prefix)| {
                values.iter().map(move |v| {
                    let mut c = prefix.clone();
                    c.push(v.clone());
                    (d.clone(), c)
                })
            })
            .collect();
    }
    all
}

pub(crate) fn expand(def: &KernelDef<'_>) -> TokenStream {
    let KernelDef { item, sig, krate, .. } = def;
    let vis = &item.vis;
    let name = &sig.name;
    let name_str = name.to_string();
    let docs: Vec<&syn::Attribute> = item.attrs.iter().filter(|a| a.path().is_ident("doc")).collect();
    let block = def.cpu_block;
    let type_idents: Vec<&syn::Ident> = sig.generics.iter().map(|g| &g.0).collect();
    let const_idents: Vec<&syn::Ident> = sig.consts.iter().map(|c| &c.0).collect();
    let gen_idents: Vec<&syn::Ident> = type_idents.iter().chain(const_idents.iter()).copied().collect();
    let gen_params: Vec<TokenStream> = sig
        .generics
        .iter()
        .map(|g| {
            let tp = &g.2;
            quote!(#tp)
        })
        .chain(sig.consts.iter().map(|c| {
            let (i, ty) = (&c.2.ident, &c.2.ty);
            quote!(const #i: #ty)
        }))
        .collect();
    let turbofish = if gen_idents.is_empty() {
        quote!()
    } else {
        quote!(::<#(#gen_idents),*>)
    };
    let marker = if gen_idents.is_empty() {
        quote!(
            pub struct __Kernel;
        )
    } else {
        quote!(pub struct __Kernel<#(#gen_params),*>(::core::marker::PhantomData<(#(#type_idents,)*)>);)
    };
    // Each const generic's `static const` line, its value formatted at instantiation.
    let const_decls: Vec<TokenStream> = sig
        .consts
        .iter()
        .map(|(ident, prim, _)| {
            let suffix = match prim {
                Prim::U64 | Prim::Usize => "ull",
                Prim::I64 | Prim::Isize => "ll",
                Prim::U32 | Prim::U16 | Prim::U8 => "u",
                _ => "",
            };
            let decl = format!(
                "static const {} {} = {{}}{suffix};",
                prim.cuda(),
                super::names::param_cname(&ident.to_string())
            );
            quote!(::std::format!(#decl, #ident))
        })
        .collect();
    let dsl = quote!(#krate::kernel::dsl);

    let mut body_params = vec![];
    let mut launch_params = vec![];
    let mut arg_names = vec![];
    let mut push_args = vec![];
    let mut bind_bufs = vec![];
    // How `call_from_wire` reads each parameter back in a worker, and passes it on.
    let mut wire_reads = vec![];
    let mut wire_args = vec![];
    // The structs whose declarations the source needs: parameters' and the body's.
    let mut struct_paths: Vec<&syn::Path> = vec![];
    let mut buf_index = 0usize;
    let lanes = vector_lanes(def.cpu_block);
    for p in &sig.params {
        let n = &p.name;
        let ty = &p.ty;
        arg_names.push(quote!(#n));
        body_params.push(p.cpu_param(&dsl));
        match &p.kind {
            ParamKind::Scalar(_) => {
                launch_params.push(quote!(#n: #ty));
                push_args.push(quote!(.dtype(#n)));
                wire_reads.push(quote!(let #n: #ty = wire.scalar()?;));
                wire_args.push(quote!(#n));
            }
            ParamKind::Struct(path) => {
                launch_params.push(quote!(#n: #ty));
                push_args.push(quote!(.kernel_arg(#n)));
                wire_reads.push(quote!(let #n: #ty = wire.scalar()?;));
                wire_args.push(quote!(#n));
                struct_paths.push(path);
            }
            ParamKind::Slice { mutable, .. } => {
                let elem = p.elem();
                let i = buf_index;
                buf_index += 1;
                // A buffer read or written as vectors must start at a multiple of the
                // vector's size (a view may not): checked at launch.
                let align = lanes.get(&n.to_string()).map(|l| quote!(.vector_access(#l)));
                if *mutable {
                    launch_params.push(quote!(#n: &mut #krate::gpu_ref::GpuRef<#elem>));
                    push_args.push(quote!(.buf_mut(#n).named(stringify!(#n)) #align .dtype(#n.len() as u64)));
                    bind_bufs.push(quote!(let #n = bufs.write::<#elem>(#i)?;));
                    wire_reads.push(quote!(let mut #n = wire.buffer::<#elem>()?; wire.skip()?;));
                    wire_args.push(quote!(&mut #n));
                } else {
                    launch_params.push(quote!(#n: &#krate::gpu_ref::GpuRef<#elem>));
                    push_args.push(quote!(.buf(#n).named(stringify!(#n)) #align .dtype(#n.len() as u64)));
                    bind_bufs.push(quote!(let #n = bufs.read::<#elem>(#i)?;));
                    wire_reads.push(quote!(let #n = wire.buffer::<#elem>()?; wire.skip()?;));
                    wire_args.push(quote!(&#n));
                }
            }
        }
    }
    struct_paths.extend(def.structs);
    let mut seen: Vec<String> = vec![];
    let struct_decls: Vec<TokenStream> = struct_paths
        .into_iter()
        .filter(|path| {
            let key = quote!(#path).to_string();
            let new = !seen.contains(&key);
            seen.push(key);
            new
        })
        .map(|path| quote!(<#path as #dsl::KernelArg>::cuda_decl()))
        .collect();
    let kernel = &def.kernel_source;
    let bounded = def.launch_bound.as_ref().map(|b| quote!(.with_launch_bounds(#b)));
    let cooperative = def.cooperative;
    let calls = def.calls;
    let headers: Vec<TokenStream> = def
        .headers
        .iter()
        .map(|h| {
            let h = format_ident!("{}", h);
            quote!(#dsl::scalar::Header::#h)
        })
        .collect();
    let gen_strs: Vec<String> = type_idents.iter().map(|g| g.to_string()).collect();
    let registered: Vec<TokenStream> = instances(sig, def.consts)
        .into_iter()
        .map(|(dts, values)| {
            let mut label = dts.join(", ");
            for ((ident, _, _), v) in sig.consts.iter().zip(&values) {
                if !label.is_empty() {
                    label.push_str(", ");
                }
                label.push_str(&format!("{ident} = {}", quote!(#v)));
            }
            let paths: Vec<TokenStream> = dts
                .iter()
                .map(|d| dtype_path(krate, d))
                .chain(values.iter().map(|v| quote!(#v)))
                .collect();
            let tf = if paths.is_empty() {
                quote!()
            } else {
                quote!(::<#(#paths),*>)
            };
            let marker_ty = if paths.is_empty() {
                quote!(__Kernel)
            } else {
                quote!(__Kernel<#(#paths),*>)
            };
            quote!(#dsl::registry::KernelInstance {
                dtypes: #label,
                entry: NAME,
                id: #dsl::registry::type_id_of::<#marker_ty>,
                source: cuda_source #tf,
                from_wire: call_from_wire #tf,
            })
        })
        .collect();
    let call_doc =
        format!("A launch of `{name_str}` with these arguments, for `Device::launch_kernel` (what [`launch`] sends).");

    // Room for every argument item: a buffer pushes two (pointer, length), others one.
    let n_push = push_args.len() * 2;
    quote! {
        #(#docs)*
        #[allow(non_snake_case)]
        #vis mod #name {
            #![allow(unused_imports, unused_mut, unused_variables, unused_parens, clippy::all)]
            use super::*;
            use #dsl::prelude::*;

            /// Names one instantiation of this kernel (the key a device loads it under).
            #[doc(hidden)]
            #marker

            /// The kernel's name: its `extern "C"` entry point.
            pub const NAME: &str = #name_str;
            const KERNEL: &str = #kernel;
            const HEADERS: &[#dsl::scalar::Header] = &[#(#headers),*];
            /// Whether the CPU emulation runs a block's threads together (the body uses
            /// `sync_threads`, shared arrays or shuffles).
            pub const COOPERATIVE: bool = #cooperative #(|| #calls::COOPERATIVE)*;

            /// The body as Rust: what the CPU device runs for each emulated thread.
            #[doc(hidden)]
            pub fn body<#(#gen_params),*>(#(#body_params),*) #block

            /// The CUDA C++ source of this kernel for the given dtypes.
            pub fn cuda_source<#(#gen_params),*>() -> ::std::string::String {
                let mut device_fns = #dsl::source::DeviceFns::default();
                #(#calls::collect(&mut device_fns);)*
                #dsl::source::SourceTemplate { kernel: KERNEL, headers: HEADERS }.assemble(
                    &#dsl::source::Instantiation {
                        generics: ::std::vec![#((#gen_strs, <#type_idents as #dsl::KernelScalar>::CUDA, <#type_idents as #dsl::KernelScalar>::HEADER)),*],
                        consts: ::std::vec![#(#const_decls),*],
                        structs: ::std::vec![#(#struct_decls),*],
                        device_fns,
                    },
                )
            }

            #[doc = #call_doc]
            pub fn call<#(#gen_params),*>(
                cfg: #krate::launch::LaunchConfig,
                #(#launch_params),*
            ) -> #dsl::KernelCall {
                let args = #krate::launch::KernelArgs::with_capacity(#n_push) #(#push_args)*;
                let emulate: #dsl::launch::Emulation = ::std::boxed::Box::new(move |bufs: &#dsl::launch::HostBufs| {
                    #(#bind_bufs)*
                    #dsl::grid::run_grid(NAME, &cfg, COOPERATIVE, ::std::sync::Arc::new(move || body #turbofish(#(#arg_names),*)))
                });
                #dsl::KernelCall::new::<__Kernel #turbofish>(NAME, cuda_source #turbofish, cfg, args, emulate) #bounded
            }

            /// Rebuilds a launch that crossed to an isolated device's worker (the same
            /// executable): each argument read back with its type.
            #[doc(hidden)]
            pub fn call_from_wire<#(#gen_params),*>(
                cfg: #krate::launch::LaunchConfig,
                wire: &mut #krate::wire::WireArgs<'_>,
            ) -> ::std::result::Result<#dsl::KernelCall, #krate::GpuError> {
                #(#wire_reads)*
                ::std::result::Result::Ok(call #turbofish(cfg, #(#wire_args),*))
            }

            /// Launches the kernel on `device` — a `Device`, or an actor's own GPU
            /// (`ActorGpu`: on the actor's stream) — compiled once per device and dtype or
            /// loaded from the disk cache (emulated on the CPU device), and resolves when
            /// it has finished.
            pub async fn launch<#(#gen_params),*>(
                device: &impl #dsl::LaunchTarget,
                cfg: #krate::launch::LaunchConfig,
                #(#launch_params),*
            ) -> ::std::result::Result<(), #krate::GpuError> {
                #dsl::LaunchTarget::launch_kernel(device, call #turbofish(cfg, #(#arg_names),*)).await
            }

            /// Enqueues the kernel on an actor's own stream (`ActorGpu`) and resolves once
            /// it is enqueued, without waiting for it: launch many, then wait once with
            /// `ActorGpu::synchronize` (the first enqueue of an instantiation waits for
            /// its compile).
            pub async fn enqueue<#(#gen_params),*>(
                gpu: &#krate::device::ActorGpu,
                cfg: #krate::launch::LaunchConfig,
                #(#launch_params),*
            ) -> ::std::result::Result<(), #krate::GpuError> {
                gpu.enqueue_kernel(call #turbofish(cfg, #(#arg_names),*)).await
            }

            /// Enqueues the kernel on a cudarc stream of the caller's, without the device's
            /// kernel actor (see `KernelCall::enqueue_on`); returns once enqueued.
            pub fn launch_on<#(#gen_params),*>(
                stream: &::std::sync::Arc<#krate::__private::cudarc::driver::CudaStream>,
                cfg: #krate::launch::LaunchConfig,
                #(#launch_params),*
            ) -> ::std::result::Result<(), #krate::GpuError> {
                call #turbofish(cfg, #(#arg_names),*).enqueue_on(stream)
            }

            #krate::__private::inventory::submit! {
                #dsl::registry::KernelRegistration {
                    name: NAME,
                    module: ::core::module_path!(),
                    instances: &[#(#registered),*],
                }
            }
        }
    }
}

/// The widest vector access (`load4`/`store4`: 4 lanes, `load2`/`store2`: 2) the body
/// makes on each buffer parameter it names directly, by name.
fn vector_lanes(block: &syn::Block) -> std::collections::HashMap<String, u64> {
    struct Find(std::collections::HashMap<String, u64>);
    impl<'ast> syn::visit::Visit<'ast> for Find {
        fn visit_expr_method_call(&mut self, m: &'ast syn::ExprMethodCall) {
            let lanes = match m.method.to_string().as_str() {
                "load4" | "store4" => 4,
                "load2" | "store2" => 2,
                _ => 0,
            };
            if let (true, syn::Expr::Path(p)) = (lanes > 0, &*m.receiver) {
                if let Some(name) = p.path.get_ident() {
                    let e = self.0.entry(name.to_string()).or_insert(0);
                    *e = (*e).max(lanes);
                }
            }
            syn::visit::visit_expr_method_call(self, m);
        }
    }
    let mut f = Find(std::collections::HashMap::new());
    syn::visit::Visit::visit_block(&mut f, block);
    f.0
}

/// What is emitted beside errors: the function's signature in the kernel's module, so
/// the IDE keeps working and uses of the module name resolve. Its body is not re-emitted:
/// the errors above are the whole report (rustc's own errors about the same statements
/// would only repeat them); the rest of the body is checked once they are fixed.
pub(crate) fn fallback(item: &syn::ItemFn, krate: &syn::Path) -> TokenStream {
    let vis = &item.vis;
    let name = &item.sig.ident;
    let mut f = item.clone();
    f.sig.ident = format_ident!("body");
    f.vis = syn::parse_quote!(pub);
    // `const`/`async` were reported; the stub body is neither.
    f.sig.constness = None;
    f.sig.asyncness = None;
    *f.block = syn::parse_quote!({ ::core::unreachable!("this #[kernel] did not compile") });
    quote! {
        #[allow(non_snake_case, dead_code, unused_variables)]
        #vis mod #name {
            #![allow(unused_imports)]
            use super::*;
            use #krate::kernel::dsl::prelude::*;
            #f
        }
    }
}
