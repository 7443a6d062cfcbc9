//! `#[derive(KernelArg)]`: a `#[repr(C)]` struct of kernel scalars, passed by value to a
//! `#[kernel]`, with its CUDA C++ declaration built from the fields' own types.

use proc_macro2::TokenStream;
use quote::quote;

use crate::errors::Errors;

pub(crate) fn derive(input: TokenStream) -> TokenStream {
    let item: syn::DeriveInput = match syn::parse2(input) {
        Ok(i) => i,
        Err(e) => return e.to_compile_error(),
    };
    let mut errors = Errors::default();
    let krate = crate::crate_path::runtime_path(None);
    let is_repr_c = item
        .attrs
        .iter()
        .any(|a| a.path().is_ident("repr") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "C"));
    if !is_repr_c {
        errors.at(
            &item.ident,
            "a KernelArg struct needs `#[repr(C)]`, so Rust and CUDA C++ lay it out the same way",
        );
    }
    if !item.generics.params.is_empty() {
        errors.at(
            &item.generics,
            "a KernelArg struct cannot be generic: CUDA C++ declares one concrete struct",
        );
    }
    let fields = match &item.data {
        syn::Data::Struct(syn::DataStruct {
            fields: syn::Fields::Named(f),
            ..
        }) => f.named.iter().collect::<Vec<_>>(),
        _ => {
            errors.at(&item.ident, "KernelArg derives for structs with named fields only");
            vec![]
        }
    };
    let only_repr_missing = !is_repr_c && item.generics.params.is_empty() && !fields.is_empty();
    if let Some(e) = errors.into_error() {
        let error = e.to_compile_error();
        if only_repr_missing {
            // The struct is otherwise fine: stand-in impls keep its uses (a kernel's
            // parameter) from adding trait errors to the one that says what to fix. The
            // program does not compile either way.
            let name = &item.ident;
            return quote! {
                #error
                // SAFETY: never run: the compile error above stops the build.
                unsafe impl #krate::__private::cudarc::driver::DeviceRepr for #name {}
                impl #krate::KernelArg for #name {
                    fn cuda_decl() -> ::std::string::String {
                        ::core::unreachable!("a KernelArg struct without #[repr(C)] does not compile")
                    }
                    fn write_bytes(&self, _: &mut [u8]) {
                        ::core::unreachable!("a KernelArg struct without #[repr(C)] does not compile")
                    }
                }
            };
        }
        return error;
    }
    let name = &item.ident;
    let name_str = name.to_string();
    let fmt = format!(
        "struct {name_str} {{{{ {}}}}};",
        fields.iter().map(|_| "{} {}; ").collect::<String>()
    );
    let parts = fields.iter().map(|f| {
        let ty = &f.ty;
        let id = f.ident.as_ref().map(|i| i.to_string()).unwrap_or_default();
        quote!(<#ty as #krate::KernelScalar>::CUDA, #id)
    });
    let copies = fields.iter().map(|f| {
        let (ty, id) = (&f.ty, &f.ident);
        quote! {
            let at = ::core::mem::offset_of!(#name, #id);
            let field: #ty = self.#id;
            // SAFETY: `field` is a kernel scalar (a plain number: no padding of its
            // own), copied to its own offset inside `out`, which is `size_of::<Self>()`
            // bytes (checked by the caller).
            unsafe {
                ::core::ptr::copy_nonoverlapping(
                    &field as *const #ty as *const u8,
                    out.as_mut_ptr().add(at),
                    ::core::mem::size_of::<#ty>(),
                )
            };
        }
    });
    quote! {
        // SAFETY: `#[repr(C)]` (checked by the derive) and every field is a
        // `KernelScalar` (checked by the `cuda_decl` below), all `DeviceRepr`: the struct
        // is plain old data with the layout the CUDA declaration describes.
        unsafe impl #krate::__private::cudarc::driver::DeviceRepr for #name {}

        impl #krate::KernelArg for #name {
            fn cuda_decl() -> ::std::string::String {
                ::std::format!(#fmt, #(#parts),*)
            }

            fn write_bytes(&self, out: &mut [u8]) {
                ::core::assert_eq!(out.len(), ::core::mem::size_of::<Self>());
                out.fill(0);
                #(#copies)*
            }
        }
    }
}
