//! Block memory and views bound by `let`: shared arrays, dynamic shared memory and 2-D views of buffers.

use super::*;

impl Tr<'_> {
    /// `x.rows(ld)` on a buffer: `Some(Some((elem, mutable, buffer's C++ name, stride)))`,
    /// `Some(None)` if malformed (reported), `None` if the expression is something else.
    #[allow(clippy::type_complexity)]
    pub(super) fn rows_decl(&mut self, e: &syn::Expr) -> Option<Option<(Ty, bool, String, String)>> {
        let syn::Expr::MethodCall(m) = e else { return None };
        if m.method != "rows" {
            return None;
        }
        let syn::Expr::Path(p) = strip_parens(&m.receiver) else {
            return None;
        };
        let v = self.lookup(&p.path.get_ident()?.to_string())?;
        let (cname, ty) = (v.cname.clone(), v.ty.clone());
        let Ty::Slice { elem, mutable } = ty else {
            self.err(
                &m.receiver,
                "`rows(ld)` views a buffer parameter (or `dyn_shared`) as a matrix",
            );
            return Some(None);
        };
        if m.args.len() != 1 {
            self.err(&m.method, "`rows(ld)` takes the row stride in elements");
            return Some(None);
        }
        let (ld, _) = self.expr(&m.args[0], None);
        Some(Some((*elem, mutable, cname, ld)))
    }

    /// `dyn_shared::<T>()`: `Some(Some(T))`, `Some(None)` if malformed (reported), `None`
    /// if the expression is something else.
    pub(super) fn dyn_shared_decl(&mut self, e: &syn::Expr) -> Option<Option<Ty>> {
        let syn::Expr::Call(c) = e else { return None };
        let syn::Expr::Path(p) = &*c.func else { return None };
        let last = p.path.segments.last()?;
        if last.ident != "dyn_shared" {
            return None;
        }
        let elem = match &last.arguments {
            syn::PathArguments::AngleBracketed(a) if c.args.is_empty() => {
                match a.args.iter().collect::<Vec<_>>().as_slice() {
                    [syn::GenericArgument::Type(t)] => {
                        scalar_type(t, &self.generics).filter(|t| t != &Ty::Prim(Prim::Bool))
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        if elem.is_none() {
            self.err(e, "write dynamic shared memory as `let mut buf = dyn_shared::<T>();` (its length is the launch's `shared_mem_bytes` / size of T)");
        }
        Some(elem)
    }

    /// `shared_array::<T, N>()`: `Some(Some((T, N)))`, `Some(None)` if malformed
    /// (reported), `None` if the expression is something else.
    pub(super) fn shared_decl(&mut self, e: &syn::Expr) -> Option<Option<(Ty, String)>> {
        let syn::Expr::Call(c) = e else { return None };
        let syn::Expr::Path(p) = &*c.func else { return None };
        let last = p.path.segments.last()?;
        if last.ident != "shared_array" {
            return None;
        }
        let hint = "write shared arrays as `let mut tile = shared_array::<T, 256>();` (a dtype and a literal length, \
                    a `const` of the body with one, or a const generic)";
        let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
            self.err(last, hint);
            return Some(None);
        };
        let args: Vec<_> = args.args.iter().collect();
        let parsed = match args.as_slice() {
            [syn::GenericArgument::Type(t), n] => {
                let n = match n {
                    syn::GenericArgument::Const(syn::Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Int(i), ..
                    })) => i.base10_parse::<usize>().ok().map(|n| n.to_string()),
                    // A `const` of the body with a literal value, or a const generic.
                    syn::GenericArgument::Type(syn::Type::Path(p)) => p.path.get_ident().and_then(|id| {
                        let name = id.to_string();
                        match self.consts.get(&name) {
                            Some(n) => Some(n.to_string()),
                            None if self.generic_consts.contains(&name) => Some(param_cname(&name)),
                            None => None,
                        }
                    }),
                    _ => None,
                };
                scalar_type(t, &self.generics)
                    .filter(|t| t != &Ty::Prim(Prim::Bool))
                    .zip(n)
            }
            _ => None,
        };
        match parsed {
            Some((t, n)) if c.args.is_empty() => Some(Some((t, n))),
            _ => {
                self.err(e, hint);
                Some(None)
            }
        }
    }
}
