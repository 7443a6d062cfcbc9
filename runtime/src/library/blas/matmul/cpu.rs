//! The CPU device's matmul: cuBLASLt's arithmetic emulated — inputs widened to f32 (TF32
//! rounds them to 10 mantissa bits first), products accumulated in f32 by the `gemm`
//! crate, then the bias and activation, then one rounding to C's type.

use super::super::gemm::cpu_gemm;
use super::operand::{held_of, HeldOperand};
use super::{Activation, Epilogue, Matmul, MatmulBuffer};
use crate::error::GpuError;

/// Runs the matmul over the locked operands (`held`, every buffer of the call).
pub(crate) fn run(
    op: &Matmul,
    epilogue: &Epilogue,
    tf32: bool,
    [a, b, c]: [&MatmulBuffer; 3],
    held: &mut [(u64, HeldOperand<'_>)],
) -> Result<(), GpuError> {
    let mut av = held_of(held, a).read_f32(a)?;
    let mut bv = held_of(held, b).read_f32(b)?;
    if tf32 {
        av.iter_mut().chain(bv.iter_mut()).for_each(|x| *x = round_tf32(*x));
    }
    // C's whole window: the elements between columns (ldc > m) go back unchanged (f32
    // holds every f32, f16 and bf16 value exactly).
    let mut cv = held_of(held, c).read_f32(c)?;
    let bias = match &epilogue.bias {
        Some(bias) => Some(held_of(held, bias).read_f32(bias)?),
        None => None,
    };
    let g = &op.shape;
    cpu_gemm(g, &op.batch, &av, &bv, &mut cv);
    if bias.is_some() || epilogue.activation != Activation::Identity {
        for i in 0..op.batch.count {
            for j in 0..g.n {
                let col = i * op.batch.stride_c + j * g.ldc;
                for (r, v) in cv[col..col + g.m].iter_mut().enumerate() {
                    let x = *v + bias.as_ref().map_or(0.0, |bias| bias[r]);
                    *v = activate(epilogue.activation, x);
                }
            }
        }
    }
    held_of(held, c).write_f32(c, &cv)
}

/// f32 → TF32 as the tensor cores take it: to nearest on 10 mantissa bits, ties away
/// from zero (`cvt.rna.tf32.f32`); infinities and NaNs unchanged.
fn round_tf32(x: f32) -> f32 {
    if !x.is_finite() {
        return x;
    }
    f32::from_bits((x.to_bits() + 0x1000) & !0x1fff)
}

fn activate(a: Activation, x: f32) -> f32 {
    match a {
        Activation::Identity => x,
        Activation::Relu => x.max(0.0),
        Activation::Gelu => {
            const SQRT_2_OVER_PI: f32 = 0.797_884_6;
            0.5 * x * (1.0 + (SQRT_2_OVER_PI * (x + 0.044_715 * x * x * x)).tanh())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tf32_keeps_ten_mantissa_bits_and_rounds_ties_away() {
        assert_eq!(round_tf32(1.0), 1.0);
        // 1 + 2^-11 is half a TF32 step above 1: away from zero, to 1 + 2^-10.
        assert_eq!(round_tf32(1.0 + 2f32.powi(-11)), 1.0 + 2f32.powi(-10));
        assert_eq!(round_tf32(-(1.0 + 2f32.powi(-11))), -(1.0 + 2f32.powi(-10)));
        assert_eq!(round_tf32(1.0 + 2f32.powi(-12)), 1.0);
        assert_eq!(round_tf32(f32::INFINITY), f32::INFINITY);
        assert!(round_tf32(f32::NAN).is_nan());
    }

    #[test]
    fn activations() {
        assert_eq!(activate(Activation::Relu, -2.0), 0.0);
        assert_eq!(activate(Activation::Relu, 3.0), 3.0);
        assert!((activate(Activation::Gelu, 1.0) - 0.841_192).abs() < 1e-5);
        assert!(activate(Activation::Gelu, -10.0).abs() < 1e-6);
    }
}
