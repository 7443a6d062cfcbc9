//! `let` statements and `const` items: the bindings of a body, each declared with its C++ type.

use super::*;

impl Tr<'_> {
    pub(super) fn local(&mut self, l: &syn::Local, top: bool) {
        if self.tuple_local(l) {
            return;
        }
        let (ident, annotated) = match &l.pat {
            syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => (pi.ident.clone(), None),
            syn::Pat::Type(pt) => match &*pt.pat {
                syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => (pi.ident.clone(), Some(&*pt.ty)),
                other => return self.bad_pattern(other),
            },
            other => return self.bad_pattern(other),
        };
        let name = ident.to_string();
        let mutable = matches!(&l.pat, syn::Pat::Ident(pi) if pi.mutability.is_some())
            || matches!(&l.pat, syn::Pat::Type(pt) if matches!(&*pt.pat, syn::Pat::Ident(pi) if pi.mutability.is_some()));
        if let Some(init) = &l.init {
            if let Some((_, diverge)) = &init.diverge {
                self.err(diverge, "`let … else` is not supported in a #[kernel]; use `if`");
                return;
            }
            if let Some(view) = self.rows_decl(&init.expr) {
                let Some((elem, mutable, base, ld)) = view else { return };
                let cname = self.fresh(&name);
                let cty = elem.cuda().unwrap_or_default();
                let konst = if mutable { "" } else { "const " };
                self.emit(&format!("{konst}{cty}* const {cname} = {base};"));
                self.emit(&format!("const k_usize {cname}_len = {base}_len;"));
                self.emit(&format!("const k_usize {cname}_ld = {ld};"));
                self.declare(
                    name,
                    cname,
                    Ty::Rows {
                        elem: Box::new(elem),
                        mutable,
                    },
                );
                return;
            }
            if let Some(dynamic) = self.dyn_shared_decl(&init.expr) {
                let Some(elem) = dynamic else { return };
                if !top || self.ret.is_some() {
                    self.err(&l.pat, "declare `dyn_shared` at the top level of a #[kernel] body (one view per block), not inside a loop, branch or #[device] fn");
                    return;
                }
                self.note_type(&elem);
                if !self.dyn_smem {
                    self.dyn_smem = true;
                    self.emit("extern __shared__ __align__(16) unsigned char k_dyn_smem[];");
                }
                let cname = self.fresh(&name);
                let cty = elem.cuda().unwrap_or_default();
                self.emit(&format!("{cty}* const {cname} = reinterpret_cast<{cty}*>(k_dyn_smem);"));
                self.emit(&format!(
                    "const k_usize {cname}_len = k_dyn_smem_size() / sizeof({cty});"
                ));
                self.declare(
                    name,
                    cname,
                    Ty::Slice {
                        elem: Box::new(elem),
                        mutable: true,
                    },
                );
                return;
            }
            if let Some(shared) = self.shared_decl(&init.expr) {
                let Some((elem, n)) = shared else { return };
                if self.ret.is_some() {
                    self.err(&l.pat, "a #[device] fn cannot declare shared arrays (CUDA would share one array between all its calls); declare it in the kernel");
                    return;
                }
                if !top {
                    self.err(&l.pat, "declare shared arrays at the top level of the kernel body (CUDA allocates them once per block), not inside a loop or branch");
                    return;
                }
                self.note_type(&elem);
                let cname = self.fresh(&name);
                self.emit(&format!("__shared__ {} {cname}[{n}];", elem.cuda().unwrap_or_default()));
                self.declare(
                    name,
                    cname,
                    Ty::Shared {
                        elem: Box::new(elem),
                        n,
                    },
                );
                return;
            }
        }
        let declared = match annotated {
            Some(t) => match scalar_type(t, &self.generics)
                .or_else(|| self.vector_type(t))
                .or_else(|| self.struct_type(t))
            {
                Some(ty) => Some(ty),
                None => {
                    self.err(t, "a `let` in a #[kernel] holds a scalar, a `Vec2`/`Vec4` or a struct: annotate it with f32 f64 f16 bf16 i8 … u64 usize isize bool, a generic parameter, `Vec4<T>` or a `#[derive(KernelArg)]` struct");
                    return;
                }
            },
            None => None,
        };
        let init = l.init.as_ref().map(|i| self.expr(&i.expr, declared.as_ref()));
        let ty = match (&declared, &init) {
            (Some(t), _) => t.clone(),
            (None, Some((_, t))) => t.clone(),
            (None, None) => {
                self.err(&l.pat, format!("give `{name}` a type (`let {name}: f32;`): a #[kernel] declares every variable with its C++ type"));
                return;
            }
        };
        // An untyped literal: typed by its uses, as rustc types it (see `flex`).
        let ty = match ty {
            Ty::IntLit => self.flex.literal(false),
            Ty::FloatLit => self.flex.literal(true),
            t => t,
        };
        let cty = match &ty {
            Ty::Unknown(_) => "auto".to_string(),
            Ty::Unit | Ty::Slice { .. } | Ty::Shared { .. } | Ty::Rows { .. } => {
                self.err(&l.pat, format!("`{name}` must hold a scalar; buffers and shared arrays cannot be rebound (index them directly)"));
                return;
            }
            t => t.cuda().unwrap_or_default(),
        };
        self.note_type(&ty);
        let cname = self.fresh(&name);
        let konst = if mutable { "" } else { "const " };
        match init {
            Some((text, _)) => self.emit(&format!("{konst}{cty} {cname} = {text};")),
            None => self.emit(&format!("{cty} {cname};")),
        }
        self.declare(name, cname, ty);
    }

    /// `let (a, mut b) = (x, y);` (optionally `: (f32, u32)`): every value is computed
    /// before any name is bound, as in Rust (`let (a, b) = (b, a);` swaps), then one C++
    /// variable per name. False if `l` is not a tuple `let`.
    pub(super) fn tuple_local(&mut self, l: &syn::Local) -> bool {
        let (pat, annotated) = match &l.pat {
            syn::Pat::Tuple(t) => (t, None),
            syn::Pat::Type(pt) => match &*pt.pat {
                syn::Pat::Tuple(t) => (t, Some(&*pt.ty)),
                _ => return false,
            },
            _ => return false,
        };
        let hint = "a tuple `let` binds plain names to a tuple of values: `let (a, b) = (x, y);`";
        let Some(syn::Expr::Tuple(values)) = l.init.as_ref().map(|i| strip_parens(&i.expr)) else {
            self.err(&l.pat, hint);
            return true;
        };
        let mut names = vec![];
        for p in &pat.elems {
            match p {
                syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                    names.push((pi.ident.to_string(), pi.mutability.is_some()))
                }
                other => {
                    self.err(other, hint);
                    return true;
                }
            }
        }
        if names.len() != values.elems.len() {
            self.err(
                values,
                format!(
                    "this tuple `let` binds {} names to {} values: give one value per name",
                    names.len(),
                    values.elems.len()
                ),
            );
            return true;
        }
        let types: Vec<Option<Ty>> = match annotated {
            None => vec![None; names.len()],
            Some(syn::Type::Tuple(t)) if t.elems.len() == names.len() => {
                let mut v = vec![];
                for e in &t.elems {
                    match scalar_type(e, &self.generics) {
                        Some(ty) => v.push(Some(ty)),
                        None => {
                            self.err(e, "a tuple `let` holds scalars");
                            return true;
                        }
                    }
                }
                v
            }
            Some(other) => {
                self.err(
                    other,
                    "annotate a tuple `let` with a tuple of as many scalar types: `(f32, u32)`",
                );
                return true;
            }
        };
        let mut computed = vec![];
        for (v, t) in values.elems.iter().zip(&types) {
            let (text, ty) = self.expr(v, t.as_ref());
            let ty = match (t, ty) {
                (Some(t), _) => t.clone(),
                (None, Ty::IntLit) => self.flex.literal(false),
                (None, Ty::FloatLit) => self.flex.literal(true),
                (None, ty) if ty.is_value() => ty,
                (None, _) => {
                    self.err(v, "a tuple `let` holds scalars");
                    return true;
                }
            };
            computed.push((text, ty));
        }
        for ((name, mutable), (text, ty)) in names.into_iter().zip(computed) {
            self.note_type(&ty);
            let cname = self.fresh(&name);
            let cty = match &ty {
                Ty::Unknown(_) => "auto".to_string(),
                t => t.cuda().unwrap_or_default(),
            };
            let konst = if mutable { "" } else { "const " };
            self.emit(&format!("{konst}{cty} {cname} = {text};"));
            self.declare(name, cname, ty);
        }
        true
    }

    /// Reports a destructuring `let`, and declares the names it binds (of unknown type)
    /// so their uses raise no further errors.
    pub(super) fn bad_pattern(&mut self, p: &syn::Pat) {
        self.err(
            p,
            "bind one plain name per `let` in a #[kernel], or a tuple of names to a tuple of values (no struct patterns)",
        );
        let mut names = vec![];
        pattern_names(p, &mut names);
        for n in names {
            self.declare(n.clone(), n.clone(), Ty::Unknown(n));
        }
    }

    /// `const TILE: usize = 16;` in the body: a C++ `const` of the same type, usable in
    /// expressions, loops and — when its value is an integer literal — shared array lengths.
    pub(super) fn const_item(&mut self, c: &syn::ItemConst) {
        if !c.generics.params.is_empty() {
            self.err(&c.generics, "a `const` item in a #[kernel] takes no generic parameters");
            return;
        }
        let Some(ty) = scalar_type(&c.ty, &self.generics).filter(|t| matches!(t, Ty::Prim(_))) else {
            self.err(
                &c.ty,
                "a `const` in a #[kernel] has a primitive number type (usize, u32, i32, f32 …) or bool",
            );
            return;
        };
        let (v, _) = self.expr(&c.expr, Some(&ty));
        let name = c.ident.to_string();
        if let syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(i), ..
        }) = &*c.expr
        {
            if let Ok(n) = i.base10_parse::<usize>() {
                self.consts.insert(name.clone(), n);
            }
        }
        let cname = self.fresh(&name);
        self.const_names.insert(name.clone());
        self.emit(&format!("const {} {cname} = {v};", ty.cuda().unwrap_or_default()));
        self.declare(name, cname, ty);
    }
}
