//! Expressions: literals (typed by what they meet), paths, operators, indexing and `if` as a value.

use super::*;

impl Tr<'_> {
    /// Translates two operands that must share a type: a literal takes the other's.
    pub(super) fn pair(&mut self, a: &syn::Expr, b: &syn::Expr, expected: Option<&Ty>) -> (Out, Out) {
        if is_untyped_literal(a) && !is_untyped_literal(b) {
            let rb = self.expr(b, expected);
            let ra = self.expr(a, Some(&rb.1));
            (ra, rb)
        } else {
            let ra = self.expr(a, expected);
            let rb = self.expr(b, Some(&ra.1));
            (ra, rb)
        }
    }

    pub(super) fn literal(&mut self, l: &syn::Lit, expected: Option<&Ty>) -> Out {
        let want = expected.filter(|t| t.is_value()).cloned();
        match l {
            syn::Lit::Bool(b) => (b.value.to_string(), Ty::Prim(Prim::Bool)),
            syn::Lit::Int(i) => {
                let digits = i.base10_digits().to_string();
                let big = digits.parse::<i64>().map_or(true, |v| v > i32::MAX as i64);
                let lit = if big { format!("{digits}ull") } else { digits };
                let suffix = i.suffix();
                let ty = if !suffix.is_empty() {
                    match Prim::from_name(suffix) {
                        Some(p) => Some(Ty::Prim(p)),
                        None => return self.err(i, format!("unknown literal suffix `{suffix}`")),
                    }
                } else {
                    want
                };
                match ty {
                    Some(t) if t.is_float() => self.float_literal(&format!("{lit}.0"), t),
                    Some(t) => {
                        let cty = t.cuda().unwrap_or_default();
                        (format!("(({cty}){lit})"), t)
                    }
                    None => (lit, Ty::IntLit),
                }
            }
            syn::Lit::Float(f) => {
                let mut digits = f.base10_digits().to_string();
                if !digits.contains(['.', 'e', 'E']) {
                    digits.push_str(".0");
                }
                let suffix = f.suffix();
                let ty = match suffix {
                    "" => want,
                    "f32" => Some(Ty::Prim(Prim::F32)),
                    "f64" => Some(Ty::Prim(Prim::F64)),
                    other => return self.err(f, format!("unknown float suffix `{other}`")),
                };
                match ty {
                    Some(t) => self.float_literal(&digits, t),
                    None => (digits, Ty::FloatLit),
                }
            }
            other => self.err(
                other,
                "strings, characters and byte literals have no place in a #[kernel]",
            ),
        }
    }

    pub(super) fn float_literal(&mut self, digits: &str, t: Ty) -> Out {
        let text = match &t {
            Ty::Prim(Prim::F32) => format!("{digits}f"),
            Ty::Prim(Prim::F64) => digits.to_string(),
            other => format!("k_from_f64<{}>({digits})", other.cuda().unwrap_or_default()),
        };
        (text, t)
    }

    pub(super) fn path(&mut self, p: &syn::ExprPath) -> Out {
        if let Some(ident) = p.path.get_ident() {
            let name = ident.to_string();
            return match self.lookup(&name) {
                Some(v) => (v.cname.clone(), v.ty.clone()),
                None => match cuda_spelling(&name) {
                    Some(dsl) => self.err(ident, format!("`{name}` is CUDA C++'s spelling; a #[kernel] writes {dsl}")),
                    None => self.err(ident, format!("`{name}` is not a parameter or local of this #[kernel]; items from outside are not visible to the generated CUDA (write a constant's value, or pass it as a parameter)")),
                },
            };
        }
        // `f32::MAX`, `core::f32::consts::PI`, `u32::MAX`.
        let segs: Vec<String> = p.path.segments.iter().map(|s| s.ident.to_string()).collect();
        let (ty_name, konst) = match segs.as_slice() {
            [t, c] => (t.as_str(), c.as_str()),
            [_, t, m, c] if m == "consts" => (t.as_str(), c.as_str()),
            _ => {
                return self.err(
                    p,
                    "paths other than local names and `f32::MAX`-style constants are not supported in a #[kernel]",
                )
            }
        };
        let Some(prim) = Prim::from_name(ty_name) else {
            return self.err(p, format!("`{}` is not visible to the generated CUDA; only constants of primitive types (`f32::MAX`, `u32::MAX`, `f64::consts::PI`) are", segs.join("::")));
        };
        let ty = Ty::Prim(prim);
        if prim.is_float() && !prim.is_half() {
            if let Some(c) = FLOAT_CONSTS.iter().find(|c| c.0 == konst) {
                let v = if prim == Prim::F32 { c.1 } else { c.2 };
                return (format!("(({})({v}))", prim.cuda()), ty);
            }
        } else if !prim.is_float() && prim != Prim::Bool && (konst == "MAX" || konst == "MIN") {
            let v = int_limit(prim, konst == "MAX");
            return (format!("(({})({v}))", prim.cuda()), ty);
        }
        self.err(
            p,
            format!("`{}` is not a constant the generated CUDA knows", segs.join("::")),
        )
    }

    pub(super) fn binary(&mut self, b: &syn::ExprBinary, expected: Option<&Ty>) -> Out {
        use syn::BinOp::*;
        if compound(&b.op).is_some() {
            self.stmt_expr(&syn::Expr::Binary(b.clone()));
            return unit();
        }
        let bool_ty = Ty::Prim(Prim::Bool);
        match b.op {
            And(_) | Or(_) => {
                let (l, _) = self.expr(&b.left, Some(&bool_ty));
                let (r, _) = self.expr(&b.right, Some(&bool_ty));
                let op = if matches!(b.op, And(_)) { "&&" } else { "||" };
                (format!("({l} {op} {r})"), bool_ty)
            }
            Eq(_) | Lt(_) | Le(_) | Ne(_) | Ge(_) | Gt(_) => {
                let ((l, _), (r, _)) = self.pair(&b.left, &b.right, None);
                let op = op_text(&b.op);
                (format!("({l} {op} {r})"), bool_ty)
            }
            Shl(_) | Shr(_) => {
                let (l, lt) = self.expr(&b.left, expected);
                let (r, _) = self.expr(&b.right, None);
                let op = if matches!(b.op, Shl(_)) { "<<" } else { ">>" };
                (format!("({l} {op} {r})"), lt)
            }
            _ => {
                let ((l, lt), (r, rt)) = self.pair(&b.left, &b.right, expected);
                let ty = if lt.is_literal() { rt } else { lt };
                let op = op_text(&b.op);
                if op == "%" && ty.is_float() {
                    return (format!("k_rem({l}, {r})"), ty);
                }
                (format!("({l} {op} {r})"), ty)
            }
        }
    }

    pub(super) fn index(&mut self, ix: &syn::ExprIndex) -> Out {
        let base = strip_parens(&ix.expr);
        let syn::Expr::Path(p) = base else {
            return self.err(&ix.expr, "index a buffer or shared array by name (`x[i]`); nested indexing is not supported (compute a flat index)");
        };
        let (b, bt) = self.path(p);
        if let syn::Expr::Tuple(t) = &*ix.index {
            let Ty::Rows { elem, .. } = bt else {
                return self.err(
                    &ix.index,
                    "a buffer takes one index; for rows and columns view it as a matrix: `let m = x.rows(ld);` then `m[(r, c)]`",
                );
            };
            let [r, c] = [t.elems.first(), t.elems.get(1)];
            let (Some(r), Some(c), 2) = (r, c, t.elems.len()) else {
                return self.err(&ix.index, "index a 2-D view with `(row, column)`");
            };
            let (r, _) = self.expr(r, None);
            let (c, _) = self.expr(c, None);
            return (format!("{b}[({r}) * {b}_ld + ({c})]"), *elem);
        }
        let elem = match bt {
            Ty::Rows { .. } => return self.err(&ix.index, "index a 2-D view with `m[(row, column)]`"),
            Ty::Slice { elem, .. } | Ty::Shared { elem, .. } => *elem,
            Ty::Unit => return (b, Ty::Unit),
            _ => return self.err(&ix.expr, "only buffers and shared arrays can be indexed in a #[kernel]"),
        };
        // Any integer indexes (an index intrinsic's value keeps its own type).
        let (i, it) = self.expr(&ix.index, None);
        // A value only C++ types (a struct field), or one reported already, passes.
        if !it.is_int() && it != Ty::Unit && !matches!(it, Ty::Unknown(_)) {
            if let syn::Expr::Range(_) = &*ix.index {
                return self.err(
                    &ix.index,
                    "slicing (`x[a..b]`) is not supported in a #[kernel]; index elements",
                );
            }
            return self.err(&ix.index, "a buffer index must be an integer (usually `usize`)");
        }
        (format!("{b}[{i}]"), elem)
    }

    pub(super) fn ternary(&mut self, i: &syn::ExprIf, expected: Option<&Ty>) -> Out {
        let single = |b: &syn::Block| -> Option<syn::Expr> {
            match b.stmts.as_slice() {
                [syn::Stmt::Expr(e, None)] => Some(e.clone()),
                _ => None,
            }
        };
        let else_expr = match &i.else_branch {
            Some((_, e)) => match &**e {
                syn::Expr::Block(b) => single(&b.block),
                syn::Expr::If(_) => Some((**e).clone()),
                _ => None,
            },
            None => None,
        };
        let (Some(a), Some(b)) = (single(&i.then_branch), else_expr) else {
            return self.err(
                i,
                "an `if` used as a value needs an `else` and one expression per branch: `if c { a } else { b }`",
            );
        };
        let (c, _) = self.expr(&i.cond, Some(&Ty::Prim(Prim::Bool)));
        let ((a, at), (b, bt)) = self.pair(&a, &b, expected);
        let ty = if at.is_literal() { bt } else { at };
        (format!("({c} ? {a} : {b})"), ty)
    }
}
