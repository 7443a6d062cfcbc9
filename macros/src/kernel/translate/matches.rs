//! `match` on integers and bools: as a statement (an `if` chain) and as a value (nested conditionals).

use super::*;

impl Tr<'_> {
    /// The scrutinee of a `match` and the condition of each arm (`None`: always taken).
    /// The scrutinee is repeated in each condition, so it may not hold a call with an
    /// effect (an atomic, a shuffle, a vote).
    pub(super) fn match_arms<'m>(&mut self, m: &'m syn::ExprMatch) -> Option<Vec<(Option<String>, &'m syn::Arm)>> {
        let tokens = quote::ToTokens::to_token_stream(&m.expr).to_string();
        let effect = ATOMICS
            .iter()
            .map(|a| a.0)
            .chain(SHUFFLES.iter().map(|s| s.0))
            .chain(VOTES.iter().map(|v| v.0))
            .find(|name| {
                tokens
                    .split(|c: char| !c.is_alphanumeric() && c != '_')
                    .any(|t| t == *name)
            });
        if let Some(name) = effect {
            self.err(
                &m.expr,
                format!("bind the scrutinee with `let` first: a #[kernel] `match` evaluates it once per arm, and `{name}` has an effect"),
            );
            return None;
        }
        let (s, st) = self.expr(&m.expr, None);
        let mut arms = vec![];
        for arm in &m.arms {
            let cond = self.pattern_cond(&arm.pat, &s, &st)?;
            let cond = match (&arm.guard, cond) {
                (None, c) => c,
                (Some((_, g)), c) => {
                    let (g, _) = self.expr(g, Some(&Ty::Prim(Prim::Bool)));
                    Some(match c {
                        Some(c) => format!("({c} && {g})"),
                        None => g,
                    })
                }
            };
            let always = cond.is_none();
            arms.push((cond, arm));
            if always {
                break;
            }
        }
        Some(arms)
    }

    /// The condition under which `pat` matches the scrutinee `s` (`None`: always).
    pub(super) fn pattern_cond(&mut self, pat: &syn::Pat, s: &str, st: &Ty) -> Option<Option<String>> {
        match pat {
            syn::Pat::Wild(_) => Some(None),
            // A `const` of the body (`ADD => …`): Rust compares with it, as here.
            syn::Pat::Ident(i)
                if i.subpat.is_none() && i.by_ref.is_none() && self.const_names.contains(&i.ident.to_string()) =>
            {
                let v = self
                    .lookup(&i.ident.to_string())
                    .map(|v| v.cname.clone())
                    .unwrap_or_default();
                Some(Some(format!("({s} == {v})")))
            }
            // `u32::MAX`, a body const by path.
            syn::Pat::Path(p) => {
                let (v, _) = self.path(p);
                Some(Some(format!("({s} == {v})")))
            }
            syn::Pat::Lit(l) => {
                let (v, _) = self.literal(&l.lit, Some(st));
                Some(Some(format!("({s} == {v})")))
            }
            syn::Pat::Range(r) => {
                let mut parts = vec![];
                if let Some(a) = &r.start {
                    parts.push(format!("{s} >= {}", self.expr(a, Some(st)).0));
                }
                if let Some(b) = &r.end {
                    let op = if matches!(r.limits, syn::RangeLimits::Closed(_)) {
                        "<="
                    } else {
                        "<"
                    };
                    parts.push(format!("{s} {op} {}", self.expr(b, Some(st)).0));
                }
                Some(Some(format!("({})", parts.join(" && "))))
            }
            syn::Pat::Or(o) => {
                let mut conds = vec![];
                for p in &o.cases {
                    match self.pattern_cond(p, s, st)? {
                        Some(c) => conds.push(c),
                        None => return Some(None),
                    }
                }
                Some(Some(format!("({})", conds.join(" || "))))
            }
            syn::Pat::Paren(p) => self.pattern_cond(&p.pat, s, st),
            other => {
                self.err(
                    other,
                    "a #[kernel] `match` takes integer or bool patterns: literals, `const`s of the body, `a | b`, \
                     ranges `a..=b` and `_` (no bindings: use the scrutinee itself)",
                );
                None
            }
        }
    }

    /// `match` as a statement: an `if` / `else if` chain.
    pub(super) fn match_stmt(&mut self, m: &syn::ExprMatch) {
        let Some(arms) = self.match_arms(m) else { return };
        for (k, (cond, arm)) in arms.iter().enumerate() {
            let open = match (k, cond) {
                (0, Some(c)) => format!("if ({c}) {{"),
                (0, None) => "{".to_string(),
                (_, Some(c)) => format!("}} else if ({c}) {{"),
                (_, None) => "} else {".to_string(),
            };
            self.emit(&open);
            match &*arm.body {
                syn::Expr::Block(b) => self.scoped_block(&b.block),
                body => {
                    self.scopes.push(HashMap::new());
                    self.indent += 1;
                    self.stmt_expr(body);
                    self.indent -= 1;
                    self.scopes.pop();
                }
            }
        }
        if !arms.is_empty() {
            self.emit("}");
        }
    }

    /// `match` as a value: nested conditionals, ending with an arm taken always.
    pub(super) fn match_value(&mut self, m: &syn::ExprMatch, expected: Option<&Ty>) -> Out {
        let Some(arms) = self.match_arms(m) else {
            return unit();
        };
        if !matches!(arms.last(), Some((None, _))) {
            return self.err(
                m,
                "a `match` used as a value in a #[kernel] ends with an arm that always matches (`_ =>`)",
            );
        }
        let mut ty = expected.cloned();
        let mut values = vec![];
        for (cond, arm) in &arms {
            let body = match &*arm.body {
                syn::Expr::Block(b) => match b.block.stmts.as_slice() {
                    [syn::Stmt::Expr(e, None)] => e.clone(),
                    _ => return self.err(&arm.body, "each arm of a `match` used as a value is one expression"),
                },
                e => e.clone(),
            };
            let (v, t) = self.expr(&body, ty.as_ref());
            if ty.as_ref().is_none_or(|t| !t.is_value()) && !is_untyped_literal(&body) {
                ty = Some(t);
            }
            values.push((cond.clone(), v));
        }
        let (_, last) = values.pop().expect("an always-taken arm");
        let text = values.into_iter().rev().fold(last, |acc, (c, v)| {
            format!("({} ? {v} : {acc})", c.expect("only the last arm is always taken"))
        });
        (text, ty.unwrap_or(Ty::Prim(Prim::I32)))
    }
}
