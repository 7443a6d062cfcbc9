//! Calls in a body: intrinsics, type functions (`T::zero()`), `#[device] fn`s, and methods
//! (math on numbers; length, vector access, views and atomics on buffers).

use super::*;

impl Tr<'_> {
    pub(super) fn call(&mut self, c: &syn::ExprCall, expected: Option<&Ty>) -> Out {
        let syn::Expr::Path(p) = &*c.func else {
            return self.err(&c.func, call_hint());
        };
        let segs: Vec<&syn::PathSegment> = p.path.segments.iter().collect();
        if let [seg] = segs.as_slice() {
            let name = seg.ident.to_string();
            if let Some((_, cuda)) = INDEX_INTRINSICS.iter().find(|i| i.0 == name) {
                if !c.args.is_empty() {
                    return self.err(&c.args, format!("`{name}()` takes no arguments"));
                }
                let ty = self.flex.fresh(c);
                return (cuda.replace("{T}", &ty.cuda().unwrap_or_default()), ty);
            }
            if let Some((_, cuda)) = WARP_SYNC.iter().find(|s| s.0 == name) {
                if !c.args.is_empty() {
                    return self.err(&c.args, format!("`{name}()` takes no arguments"));
                }
                return (cuda.to_string(), Ty::Unit);
            }
            if name == "nanosleep" {
                if c.args.len() != 1 {
                    return self.err(c, "`nanosleep(ns)` takes the nanoseconds to wait, a `u32`");
                }
                let (ns, _) = self.expr(&c.args[0], Some(&Ty::Prim(Prim::U32)));
                return (format!("k_nanosleep({ns})"), Ty::Unit);
            }
            if let Some((_, cuda, ty)) = VOTES.iter().find(|v| v.0 == name) {
                if c.args.len() != 1 {
                    return self.err(c, format!("`{name}(predicate)` takes one `bool`"));
                }
                let (p, _) = self.expr(&c.args[0], Some(&Ty::Prim(Prim::Bool)));
                let ty = Ty::Prim(if *ty == "u32" { Prim::U32 } else { Prim::Bool });
                return (cuda.replace("{p}", &p), ty);
            }
            if ATOMICS.iter().any(|a| a.0 == name) {
                // `atomic_add(&mut y[i], v)`, the CUDA spelling: say the DSL's.
                let target = match c.args.first() {
                    Some(syn::Expr::Reference(r)) => match strip_parens(&r.expr) {
                        syn::Expr::Index(ix) => Some((
                            quote::ToTokens::to_token_stream(&ix.expr).to_string(),
                            quote::ToTokens::to_token_stream(&ix.index).to_string(),
                        )),
                        _ => None,
                    },
                    _ => None,
                };
                let rest: Vec<String> = c
                    .args
                    .iter()
                    .skip(1)
                    .map(|a| quote::ToTokens::to_token_stream(a).to_string())
                    .collect();
                let hint = match target {
                    Some((buf, i)) => format!("write `{buf}.{name}({i}, {})`", rest.join(", ")),
                    None => format!("write `buffer.{name}(index, …)`"),
                };
                return self.err(
                    c,
                    format!("atomics are methods of the buffer (or shared array) in a #[kernel]: {hint}"),
                );
            }
            if name == "cpu_unsupported" {
                return self.err(
                    c,
                    "`cpu_unsupported()` only belongs in the Rust body of a `#[kernel(cuda = \"…\")]` kernel",
                );
            }
            if let Some((_, cuda)) = SHUFFLES.iter().find(|s| s.0 == name) {
                if c.args.len() != 2 {
                    return self.err(c, format!("`{name}(value, n)` takes a value and a lane offset"));
                }
                let (v, vt) = self.expr(&c.args[0], expected);
                let (n, _) = self.expr(&c.args[1], Some(&Ty::Prim(Prim::U32)));
                return (format!("{cuda}(0xffffffffu, {v}, {n})"), vt);
            }
            if name == "shared_array" {
                return self.err(
                    c,
                    "bind a shared array with `let mut`: `let mut tile = shared_array::<T, 256>();`",
                );
            }
            if name == "dyn_shared" {
                return self.err(
                    c,
                    "bind dynamic shared memory with `let mut`: `let mut buf = dyn_shared::<T>();`",
                );
            }
        }
        if let [ty_seg, f] = segs.as_slice() {
            if let Some(kind) = vectors::kind_named(&ty_seg.ident.to_string()) {
                return self.vector_constructor(c, kind, &f.ident, expected);
            }
        }
        // `T::zero()`, `f32::from_f64(x)`.
        if let [ty_seg, f] = segs.as_slice() {
            let tname = ty_seg.ident.to_string();
            let ty = self
                .generics
                .get(&tname)
                .map(|b| Ty::Generic(tname.clone(), *b))
                .or_else(|| Prim::from_name(&tname).map(Ty::Prim));
            if let Some(ty) = ty {
                let fname = f.ident.to_string();
                let cty = ty.cuda().unwrap_or_default();
                if fname == "from_bits" && c.args.len() == 1 {
                    // Rust's `f64::from_bits(u64)` / `f32::from_bits(u32)`: `to_bits` undone.
                    let (bits, cuda) = match ty {
                        Ty::Prim(Prim::F64) => (Prim::U64, "__longlong_as_double((long long)({x}))"),
                        Ty::Prim(Prim::F32) => (Prim::U32, "__uint_as_float({x})"),
                        _ => {
                            return self.err(
                                &f.ident,
                                "`from_bits` makes an `f64` (of a `u64`) or an `f32` (of a `u32`)",
                            )
                        }
                    };
                    let (x, _) = self.expr(&c.args[0], Some(&Ty::Prim(bits)));
                    return (cuda.replace("{x}", &x), ty);
                }
                if fname == "from_f64" && c.args.len() == 1 {
                    let (x, _) = self.expr(&c.args[0], Some(&Ty::Prim(Prim::F64)));
                    return (format!("k_from_f64<{cty}>({x})"), ty);
                }
                if fname == "from_f32" && c.args.len() == 1 {
                    let (x, _) = self.expr(&c.args[0], Some(&Ty::Prim(Prim::F32)));
                    return (format!("k_from_f32<{cty}>({x})"), ty);
                }
                if fname == "from_i64" && c.args.len() == 1 {
                    if !ty.is_int() {
                        return self.err(&f.ident, "`from_i64` makes an integer; for a float use `from_f64`");
                    }
                    let (x, _) = self.expr(&c.args[0], Some(&Ty::Prim(Prim::I64)));
                    return (format!("(({cty})({x}))"), ty);
                }
                if let Some((_, tpl)) = TYPE_FUNCTIONS.iter().find(|t| t.0 == fname) {
                    if ty.is_int() && (fname == "zero" || fname == "one") {
                        let v = if fname == "zero" { 0 } else { 1 };
                        return (format!("(({cty}){v})"), ty);
                    }
                    if ty.is_float() && c.args.is_empty() {
                        return (tpl.replace("{T}", &cty), ty);
                    }
                }
                return self.err(
                    &p.path,
                    format!("`{tname}::{fname}` cannot be called from a #[kernel]: {}", call_hint()),
                );
            }
        }
        self.device_call(c, p)
    }

    /// A call of a `#[device] fn` (any other function is reported by rustc where the
    /// kernel's module names the helper's generated items): `name(args)` in C++, a buffer
    /// argument passed with its length, generic arguments deduced as C++ does or given
    /// by a turbofish.
    pub(super) fn device_call(&mut self, c: &syn::ExprCall, p: &syn::ExprPath) -> Out {
        let Some(last) = p.path.segments.last() else {
            return self.err(&p.path, call_hint());
        };
        if p.qself.is_some() || p.path.segments.iter().rev().skip(1).any(|s| !s.arguments.is_none()) {
            return self.err(
                &p.path,
                format!("this function cannot be called from a #[kernel]: {}", call_hint()),
            );
        }
        let name = last.ident.to_string();
        if let (true, Some(dsl)) = (p.path.segments.len() == 1, cuda_spelling(&name)) {
            return self.err(
                &p.path,
                format!("`{name}` is CUDA C++'s spelling; a #[kernel] writes {dsl}"),
            );
        }
        if name == self.name && self.ret.is_some() {
            return self.err(
                &p.path,
                format!("`{name}` calls itself: a #[device] fn cannot recurse (CUDA's per-thread stack is small and the depth unknown); write it as a loop"),
            );
        }
        let mut template = String::new();
        if let syn::PathArguments::AngleBracketed(a) = &last.arguments {
            let mut tys = vec![];
            for g in &a.args {
                match g {
                    syn::GenericArgument::Type(t) => match scalar_type(t, &self.generics) {
                        Some(t) => tys.push(t.cuda().unwrap_or_default()),
                        None => {
                            return self.err(
                                t,
                                "a #[device] fn's generic argument is a scalar type or a generic parameter",
                            )
                        }
                    },
                    other => return self.err(other, "a #[device] fn takes type arguments only"),
                }
            }
            template = format!("<{}>", tys.join(", "));
        }
        let mut path = p.path.clone();
        if let Some(l) = path.segments.last_mut() {
            l.arguments = syn::PathArguments::None;
        }
        let key = quote::ToTokens::to_token_stream(&path).to_string();
        if !self
            .calls
            .iter()
            .any(|c| quote::ToTokens::to_token_stream(c).to_string() == key)
        {
            self.calls.push(path);
        }
        let mut args = vec![];
        for a in &c.args {
            let (t, ty) = self.expr(a, None);
            match ty {
                Ty::Slice { .. } => args.push(format!("{t}, {t}_len")),
                Ty::Shared { .. } => {
                    return self.err(
                        a,
                        "shared arrays cannot be passed to a #[device] fn; index them in the kernel and pass values",
                    );
                }
                Ty::Flex(_, false) => {
                    self.converts.insert(a as *const syn::Expr as usize);
                    args.push(t);
                }
                _ => args.push(t),
            }
        }
        let cname = param_cname(&name);
        let text = format!("{cname}{template}({})", args.join(", "));
        (text.clone(), Ty::Unknown(text))
    }

    pub(super) fn method(&mut self, m: &syn::ExprMethodCall) -> Out {
        let name = m.method.to_string();
        if m.turbofish.is_some() {
            return self.err(&m.method, "turbofish method calls are not supported in a #[kernel]");
        }
        // Buffer methods take the buffer by name.
        if let syn::Expr::Path(p) = strip_parens(&m.receiver) {
            if let Some(v) = p.path.get_ident().and_then(|i| self.lookup(&i.to_string())) {
                let (cname, ty) = (v.cname.clone(), v.ty.clone());
                match (&ty, name.as_str()) {
                    (Ty::Slice { .. } | Ty::Rows { .. }, "len") => {
                        return (format!("{cname}_len"), Ty::Prim(Prim::Usize))
                    }
                    (Ty::Rows { .. }, "stride") => return (format!("{cname}_ld"), Ty::Prim(Prim::Usize)),
                    (Ty::Slice { .. }, "rows") => {
                        return self.err(m, "bind a 2-D view with `let`: `let m = x.rows(ld);`, then `m[(r, c)]`")
                    }
                    (Ty::Slice { .. } | Ty::Rows { .. }, "is_empty") => {
                        return (format!("({cname}_len == 0)"), Ty::Prim(Prim::Bool))
                    }
                    (Ty::Shared { n, .. }, "len") => return (format!("((k_usize){n})"), Ty::Prim(Prim::Usize)),
                    _ => {}
                }
                if let (Ty::Slice { elem, mutable }, Some((kind, store))) = (&ty, vectors::access_named(&name)) {
                    return self.vector_access(m, kind, store, &cname, elem, *mutable);
                }
                if let Some((_, helper, n)) = ATOMICS.iter().find(|a| a.0 == name) {
                    let elem = match &ty {
                        Ty::Slice { elem, mutable: true } | Ty::Shared { elem, .. } => (**elem).clone(),
                        Ty::Slice { mutable: false, .. } => {
                            return self.err(&m.receiver, format!("`{name}` writes: take the buffer as `&mut [T]`"));
                        }
                        _ => {
                            return self.err(
                                &m.receiver,
                                format!("`{name}` is a method of writable buffers and shared arrays"),
                            )
                        }
                    };
                    if m.args.len() != *n {
                        let what = match n {
                            1 => "argument (the index)",
                            2 => "arguments (the index, then the value)",
                            _ => "arguments (the index, then the values)",
                        };
                        return self.err(&m.method, format!("`{name}` takes {n} {what}"));
                    }
                    let (i, _) = self.expr(&m.args[0], None);
                    let mut args = vec![format!("&{cname}[{i}]")];
                    for a in m.args.iter().skip(1) {
                        args.push(self.expr(a, Some(&elem)).0);
                    }
                    return (format!("{helper}({})", args.join(", ")), elem);
                }
                if matches!(ty, Ty::Slice { .. } | Ty::Shared { .. } | Ty::Rows { .. }) {
                    return self.err(
                        &m.method,
                        format!("`{name}` is not a #[kernel] buffer method; {}", method_hint()),
                    );
                }
            }
        }
        let (r, rt) = self.expr(&m.receiver, None);
        if rt.is_reported() {
            // The receiver was reported already.
            return (r, rt);
        }
        let arity = m.args.len();
        if UNARY_MATH.contains(&name.as_str()) && arity == 0 {
            if !(rt.is_float() || (rt.is_int() && name == "abs")) {
                return self.err(&m.receiver, format!("`{name}` needs a float receiver"));
            }
            return (format!("k_{name}({r})"), rt);
        }
        if BINARY_MATH.contains(&name.as_str()) && arity == 1 {
            let (a, _) = self.expr(&m.args[0], Some(&rt));
            return (format!("k_{name}({r}, {a})"), rt);
        }
        match (name.as_str(), arity) {
            ("mul_add", 2) => {
                let (a, _) = self.expr(&m.args[0], Some(&rt));
                let (b, _) = self.expr(&m.args[1], Some(&rt));
                (format!("k_mul_add({r}, {a}, {b})"), rt)
            }
            ("powi", 1) => {
                let (n, _) = self.expr(&m.args[0], Some(&Ty::Prim(Prim::I32)));
                (format!("k_powi({r}, {n})"), rt)
            }
            ("to_f64", 0) => (format!("k_to_f64({r})"), Ty::Prim(Prim::F64)),
            ("to_i64", 0) if rt.is_int() => (format!("((long long)({r}))"), Ty::Prim(Prim::I64)),
            ("to_i64", 0) => self.err(&m.method, "`to_i64` widens an integer; for a float use `to_f64`"),
            ("wrapping_add", 1) if rt == Ty::Prim(Prim::I64) => {
                let (a, _) = self.expr(&m.args[0], Some(&rt));
                (format!("k_wrapping_add({r}, {a})"), rt)
            }
            ("wrapping_add", 1) => self.err(
                &m.method,
                "`wrapping_add` adds two `i64`s (widen with `to_i64()` first)",
            ),
            ("to_bits", 0) if rt == Ty::Prim(Prim::F64) => (
                format!("((unsigned long long)__double_as_longlong({r}))"),
                Ty::Prim(Prim::U64),
            ),
            ("to_bits", 0) if rt == Ty::Prim(Prim::F32) => {
                (format!("((unsigned int)__float_as_uint({r}))"), Ty::Prim(Prim::U32))
            }
            // A `#[device] fn`'s result: C++ picks the width (Rust has checked the type).
            ("to_bits", 0) if matches!(rt, Ty::Unknown(_)) => {
                let text = format!("k_to_bits({r})");
                (text.clone(), Ty::Unknown(text))
            }
            ("to_bits", 0) => self.err(
                &m.method,
                "`to_bits` reads an `f32`'s bits as a `u32` or an `f64`'s as a `u64` (convert with `to_f32()` or \
                 `to_f64()` first)",
            ),
            // A population count (of the integer's own width): how many lanes a `ballot`
            // mask holds, a lane's rank among them.
            ("count_ones", 0) if rt == Ty::Prim(Prim::U32) => {
                (format!("((unsigned int)__popc({r}))"), Ty::Prim(Prim::U32))
            }
            ("count_ones", 0) if rt == Ty::Prim(Prim::U64) => {
                (format!("((unsigned int)__popcll({r}))"), Ty::Prim(Prim::U32))
            }
            ("count_ones", 0) if rt.is_int() || matches!(rt, Ty::Unknown(_)) => {
                (format!("k_count_ones({r})"), Ty::Prim(Prim::U32))
            }
            ("count_ones", 0) => self.err(&m.method, "`count_ones` counts the set bits of an integer"),
            ("to_f32", 0) => (format!("k_to_f32({r})"), Ty::Prim(Prim::F32)),
            _ => self.err(
                &m.method,
                format!("`{name}` cannot be called in a #[kernel]; {}", method_hint()),
            ),
        }
    }
}
