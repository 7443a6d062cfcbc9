//! Statements: control flow (`if`, `while`, `loop`, `for`, `break`, `return`), assignments and the places they write.

use super::*;

impl Tr<'_> {
    pub(super) fn stmt_expr(&mut self, e: &syn::Expr) {
        match e {
            syn::Expr::If(i) => self.if_stmt(i),
            syn::Expr::Match(m) => self.match_stmt(m),
            syn::Expr::While(w) => {
                if let Some(l) = &w.label {
                    self.err(
                        l,
                        "loop labels are not supported in a #[kernel]; restructure with a flag",
                    );
                    return;
                }
                if let syn::Expr::Let(l) = &*w.cond {
                    self.err(
                        l,
                        "`while let` is not supported in a #[kernel]; use `while` with a condition",
                    );
                    return;
                }
                let (c, _) = self.expr(&w.cond, Some(&Ty::Prim(Prim::Bool)));
                self.emit(&format!("while ({c}) {{"));
                self.scoped_block(&w.body);
                self.emit("}");
            }
            syn::Expr::Loop(l) => {
                if let Some(lb) = &l.label {
                    self.err(
                        lb,
                        "loop labels are not supported in a #[kernel]; restructure with a flag",
                    );
                    return;
                }
                self.emit("while (true) {");
                self.scoped_block(&l.body);
                self.emit("}");
            }
            syn::Expr::ForLoop(f) => self.for_loop(f),
            syn::Expr::Block(b) => {
                if b.label.is_some() {
                    self.err(b, "block labels are not supported in a #[kernel]");
                    return;
                }
                self.emit("{");
                self.scoped_block(&b.block);
                self.emit("}");
            }
            syn::Expr::Break(b) => {
                if let Some(l) = &b.label {
                    self.err(l, "labelled `break` is not supported in a #[kernel]");
                } else if let Some(v) = &b.expr {
                    self.err(v, "`break` with a value is not supported in a #[kernel]");
                } else {
                    self.emit("break;");
                }
            }
            syn::Expr::Continue(c) => {
                if let Some(l) = &c.label {
                    self.err(l, "labelled `continue` is not supported in a #[kernel]");
                } else {
                    self.emit("continue;");
                }
            }
            syn::Expr::Return(r) => match (&r.expr, self.ret.clone()) {
                (Some(v), Some(t)) if t != Ty::Unit => {
                    let (v, _) = self.expr(v, Some(&t));
                    self.emit(&format!("return {v};"));
                }
                (Some(v), Some(_)) => {
                    self.err(
                        v,
                        "this #[device] fn returns nothing: declare its return type (`-> f32`) or `return;`",
                    );
                }
                (Some(v), None) => {
                    self.err(
                        v,
                        "a #[kernel] returns nothing: write the value into an output buffer and `return;`",
                    );
                }
                (None, Some(t)) if t != Ty::Unit => {
                    self.err(r, "this #[device] fn returns a value: `return value;`");
                }
                (None, _) => self.emit("return;"),
            },
            syn::Expr::Assign(a) => {
                let (l, lt) = self.place(&a.left);
                let (r, _) = self.expr(&a.right, Some(&lt));
                self.emit(&format!("{l} = {r};"));
            }
            syn::Expr::Binary(b) if compound(&b.op).is_some() => {
                let (l, lt) = self.place(&b.left);
                let rhs_expected = if matches!(b.op, syn::BinOp::ShlAssign(_) | syn::BinOp::ShrAssign(_)) {
                    None
                } else {
                    Some(lt.clone())
                };
                let (r, _) = self.expr(&b.right, rhs_expected.as_ref());
                let op = compound(&b.op).expect("checked");
                if op == "%=" && lt.is_float() {
                    self.emit(&format!("{l} = k_rem({l}, {r});"));
                } else {
                    self.emit(&format!("{l} {op} {r};"));
                }
            }
            other => {
                let (text, _) = self.expr(other, None);
                if !text.is_empty() {
                    self.emit(&format!("{text};"));
                }
            }
        }
    }

    /// An assignable place: a local, a buffer element or a shared element.
    pub(super) fn place(&mut self, e: &syn::Expr) -> Out {
        match strip_parens(e) {
            syn::Expr::Index(ix) => match self.read_only_buffer(&ix.expr) {
                Some(name) => self.err(
                    ix,
                    format!("`{name}` is a read-only buffer (`&[T]`): take it as `&mut [T]` to write it"),
                ),
                None => self.expr(e, None),
            },
            syn::Expr::Path(_) => self.expr(e, None),
            syn::Expr::Field(f) if matches!(strip_parens(&f.base), syn::Expr::Path(_)) => self.expr(e, None),
            other => self.err(other, "assign to a variable or a buffer element (`y[i] = …`)"),
        }
    }

    /// The name of the `&[T]` parameter `e` names, if it names one.
    pub(super) fn read_only_buffer(&self, e: &syn::Expr) -> Option<String> {
        let syn::Expr::Path(p) = strip_parens(e) else {
            return None;
        };
        let ident = p.path.get_ident()?;
        let read_only = matches!(
            self.lookup(&ident.to_string())?.ty,
            Ty::Slice { mutable: false, .. } | Ty::Rows { mutable: false, .. }
        );
        read_only.then(|| ident.to_string())
    }

    pub(super) fn if_stmt(&mut self, i: &syn::ExprIf) {
        if let syn::Expr::Let(l) = &*i.cond {
            self.err(l, "`if let` is not supported in a #[kernel]; compare values with `if`");
            return;
        }
        let (c, _) = self.expr(&i.cond, Some(&Ty::Prim(Prim::Bool)));
        self.emit(&format!("if ({c}) {{"));
        self.scoped_block(&i.then_branch);
        match &i.else_branch {
            None => self.emit("}"),
            Some((_, e)) => match &**e {
                syn::Expr::If(inner) => {
                    self.emit("} else {");
                    self.indent += 1;
                    self.if_stmt(inner);
                    self.indent -= 1;
                    self.emit("}");
                }
                syn::Expr::Block(b) => {
                    self.emit("} else {");
                    self.scoped_block(&b.block);
                    self.emit("}");
                }
                other => {
                    self.err(other, "unsupported `else` branch");
                }
            },
        }
    }

    pub(super) fn for_loop(&mut self, f: &syn::ExprForLoop) {
        if let Some(l) = &f.label {
            self.err(
                l,
                "loop labels are not supported in a #[kernel]; restructure with a flag",
            );
            return;
        }
        let syn::Pat::Ident(pi) = &*f.pat else {
            self.err(&f.pat, "a #[kernel] `for` binds one name: `for i in 0..n`");
            return;
        };
        let hint = "a #[kernel] `for` loops over a range: `for i in a..b`, `a..=b` or `(a..b).step_by(s)`";
        let (range, step) = match &*f.expr {
            syn::Expr::Range(r) => (r, None),
            syn::Expr::MethodCall(m) if m.method == "step_by" && m.args.len() == 1 => match strip_parens(&m.receiver) {
                syn::Expr::Range(r) => (r, Some(&m.args[0])),
                _ => {
                    self.err(&f.expr, hint);
                    return;
                }
            },
            other => {
                self.err(other, hint);
                return;
            }
        };
        let (Some(start), Some(end)) = (&range.start, &range.end) else {
            self.err(range, "a #[kernel] `for` needs both ends of its range: `a..b`");
            return;
        };
        let ((s, st), (e, et)) = self.pair(start, end, None);
        let ty = match (&st, &et) {
            (Ty::IntLit, Ty::IntLit) => Ty::Prim(Prim::I32),
            (t, _) if !t.is_literal() => t.clone(),
            (_, t) => t.clone(),
        };
        if !ty.is_int() {
            self.err(range, "a #[kernel] `for` range must be of integers");
            return;
        }
        let cty = ty.cuda().unwrap_or_else(|| "int".into());
        self.scopes.push(HashMap::new());
        let name = pi.ident.to_string();
        let cname = self.fresh(&name);
        let step_text = match step {
            Some(st) => format!("{cname} += {}", self.expr(st, Some(&ty)).0),
            None => format!("++{cname}"),
        };
        let cmp = if matches!(range.limits, syn::RangeLimits::Closed(_)) {
            "<="
        } else {
            "<"
        };
        self.emit(&format!("for ({cty} {cname} = {s}; {cname} {cmp} {e}; {step_text}) {{"));
        self.declare(name, cname, ty);
        self.scoped_block(&f.body);
        self.scopes.pop();
        self.emit("}");
    }
}
