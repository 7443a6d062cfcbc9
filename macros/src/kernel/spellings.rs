//! CUDA's spellings that a kernel body may use as they are, rewritten to the DSL's before
//! the body is translated or emulated.
//!
//! `atomic_add(&mut hist[b], 1u32)` — CUDA's `atomicAdd(&hist[b], 1u)`, and cubecl's
//! form — is `hist.atomic_add(b, 1u32)`: the same atomic on the GPU and the same relaxed
//! read-modify-write in the CPU emulation. Every atomic of the DSL (`atomic_add`, `_min`,
//! `_max`, `_exch`, `_cas`) is taken in this form, with `&mut` or `&`, on a buffer or a
//! shared array; any other first argument is left for the translator's error, which says
//! the method form.

use syn::visit_mut::VisitMut;
use syn::Expr;

use super::intrinsics::ATOMICS;

/// `block` with each `atomic_op(&mut base[index], args…)` written `base.atomic_op(index,
/// args…)`, with the call's spans.
pub(crate) fn accept_cuda_spellings(block: &mut syn::Block) {
    Atomics.visit_block_mut(block);
}

struct Atomics;

impl VisitMut for Atomics {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        syn::visit_mut::visit_expr_mut(self, e);
        let Expr::Call(call) = e else { return };
        let Expr::Path(f) = &*call.func else { return };
        let Some(name) = f.path.get_ident() else { return };
        if !ATOMICS.iter().any(|a| name == a.0) {
            return;
        }
        let Some(Expr::Reference(target)) = call.args.first() else {
            return;
        };
        let mut place = &*target.expr;
        while let Expr::Paren(p) = place {
            place = &p.expr;
        }
        let Expr::Index(ix) = place else { return };
        let (base, index, method) = (&ix.expr, &ix.index, name.clone());
        let rest = call.args.iter().skip(1);
        *e = syn::parse_quote_spanned!(method.span()=> #base.#method(#index, #(#rest),*));
    }
}
