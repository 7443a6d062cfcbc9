//! Struct values of `#[derive(KernelArg)]` structs: literals and annotated `let`s.

use super::*;

impl Tr<'_> {
    /// `P { x: a, y: b }` of a `#[derive(KernelArg)]` struct (its C++ declaration joins
    /// the source): every field given, each converted to its field's type by C++.
    pub(super) fn struct_literal(&mut self, st: &syn::ExprStruct) -> Out {
        if let Some(rest) = &st.rest {
            return self.err(
                rest,
                "give every field of a struct literal in a #[kernel] (no `..base`)",
            );
        }
        if st.qself.is_some() {
            return self.err(st, "name the struct by its path: `Params { … }`");
        }
        let name = st.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default();
        let mut sets = vec![];
        for f in &st.fields {
            let syn::Member::Named(field) = &f.member else {
                return self.err(&f.member, "a #[kernel] struct literal names its fields");
            };
            let (v, _) = self.expr(&f.expr, None);
            sets.push(format!("k_s.{field} = {v};"));
        }
        self.note_struct(&st.path);
        // An immediately-called lambda: a value expression whatever the field order.
        (
            format!("([&]() {{ {name} k_s; {} return k_s; }}())", sets.join(" ")),
            Ty::Struct(name),
        )
    }

    /// Records a `#[derive(KernelArg)]` struct the body uses, for its declaration.
    pub(super) fn note_struct(&mut self, path: &syn::Path) {
        let key = quote::ToTokens::to_token_stream(path).to_string();
        if !self
            .structs
            .iter()
            .any(|p| quote::ToTokens::to_token_stream(p).to_string() == key)
        {
            self.structs.push(path.clone());
        }
    }

    /// A `#[derive(KernelArg)]` struct named in a `let` annotation, if `t` is one.
    pub(super) fn struct_type(&mut self, t: &syn::Type) -> Option<Ty> {
        let syn::Type::Path(p) = t else { return None };
        let last = p.path.segments.last()?;
        let name = last.ident.to_string();
        if p.qself.is_some()
            || !last.arguments.is_none()
            || vectors::kind_named(&name).is_some()
            || !name.starts_with(char::is_uppercase)
        {
            return None;
        }
        self.note_struct(&p.path);
        Some(Ty::Struct(name))
    }
}
