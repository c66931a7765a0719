//! The int8 encoder's weight matmuls as a tract op, backed by [`crate::qgemm`].
//!
//! Since issue #17 the int8 model runs on the fused forward pass of [`super::encoder`];
//! this op remains so that tract can parse, type and run `model-int8.onnx` as written —
//! the reference the fused pass is tested against.
//!
//! `models/fetch` writes `model-int8.onnx` with each of the 36 encoder linears (q, k, v,
//! attention output, FFN in, FFN out × 6 layers) as one node `PrimdInt8Linear` (domain
//! `ai.primd`): inputs `x` (f32 `[.., K]`), `weight` (int8 `[N, K]`, the torch layout),
//! `weight_scale` (f32 `[N]`, one per output channel) and `bias` (f32 `[N]`).
//! Everything else in that graph (embeddings, attention, LayerNorm, GELU) is standard
//! ONNX and stays in tract, in f32.
//!
//! Why a custom node instead of tract's own int8 path: every standard ONNX int8 recipe
//! (MatMulInteger, QLinearMatMul, QDQ) ends on tract 0.23.9 either on its
//! byte-widening i32 kernel (25-300x slower than fp32) or as fake quantisation around
//! f32 matmuls (the embedder measurements, "Embedder: int8 vs fp32 vs onnxruntime").
//! Registering the node with tract's ONNX parser
//! keeps the file small (int8 on disk, ~23 MB), needs no graph surgery after loading,
//! and lets tract optimise the rest of the graph as usual: when the graph is typed the
//! node's constant inputs are packed once into [`PackedWeights`] and the node becomes
//! [`Int8Linear`], whose only input is `x`.

use std::cell::RefCell;
use std::sync::Arc;

use tract_onnx::model::{OnnxOpRegister, ParsingContext};
use tract_onnx::pb::NodeProto;
use tract_onnx::tract_hir::internal::*;

use crate::qgemm::{self, PackedWeights, Scratch};

/// ONNX op type of the node (its domain, `ai.primd`, is not looked at by tract).
pub const OP_TYPE: &str = "PrimdInt8Linear";

/// Teaches tract's ONNX parser the `PrimdInt8Linear` node.
pub fn register(ops: &mut OnnxOpRegister) {
    ops.insert(OP_TYPE, parse);
}

fn parse(
    _ctx: &ParsingContext,
    _node: &NodeProto,
) -> TractResult<(Box<dyn InferenceOp>, Vec<String>)> {
    Ok((expand(Int8LinearNode), vec![]))
}

/// The node as parsed: shape inference, then, when typing, packing of its constants.
#[derive(Clone, Debug)]
struct Int8LinearNode;

impl Expansion for Int8LinearNode {
    fn name(&self) -> StaticName {
        OP_TYPE.into()
    }

    fn rules<'r, 'p: 'r, 's: 'r>(
        &'s self,
        s: &mut Solver<'r>,
        inputs: &'p [TensorProxy],
        outputs: &'p [TensorProxy],
    ) -> InferenceResult {
        check_input_arity(inputs, 4)?;
        check_output_arity(outputs, 1)?;
        s.equals(&inputs[0].datum_type, f32::datum_type())?;
        s.equals(&inputs[1].datum_type, i8::datum_type())?;
        s.equals(&inputs[2].datum_type, f32::datum_type())?;
        s.equals(&inputs[3].datum_type, f32::datum_type())?;
        s.equals(&outputs[0].datum_type, f32::datum_type())?;
        s.equals(&inputs[1].rank, 2)?;
        s.equals(&inputs[2].rank, 1)?;
        s.equals(&inputs[3].rank, 1)?;
        s.equals(&outputs[0].rank, &inputs[0].rank)?;
        s.given_2(&inputs[0].shape, &inputs[1].shape, move |s, x, w| {
            let mut out = x.clone();
            if let Some(last) = out.last_mut() {
                *last = w[0].clone();
            }
            s.equals(&outputs[0].shape, ShapeFactoid::from(out))
        })
    }

    fn wire(
        &self,
        prefix: &str,
        model: &mut TypedModel,
        inputs: &[OutletId],
    ) -> TractResult<TVec<OutletId>> {
        let konst = |ix: usize, what: &str| -> TractResult<Arc<Tensor>> {
            model
                .outlet_fact(inputs[ix])?
                .konst
                .clone()
                .with_context(|| format!("{prefix}: {what} must be a constant (an initializer)"))
        };
        let (w, scale, bias) = (
            konst(1, "weight")?,
            konst(2, "weight_scale")?,
            konst(3, "bias")?,
        );
        let (n, k) = (w.shape()[0], w.shape()[1]);
        ensure!(
            scale.shape() == [n] && bias.shape() == [n],
            "{prefix}: weight is [{n}, {k}] but weight_scale is {:?} and bias {:?}",
            scale.shape(),
            bias.shape()
        );
        let x = model.outlet_fact(inputs[0])?.shape.to_tvec();
        ensure!(
            x.last() == Some(&k.to_dim()),
            "{prefix}: input is {x:?}, weight expects {k} features"
        );
        let (w, scale, bias) = (
            w.try_as_plain_ram()?,
            scale.try_as_plain_ram()?,
            bias.try_as_plain_ram()?,
        );
        let w = w.as_slice::<i8>()?;
        ensure!(
            w.iter().all(|&v| v != i8::MIN),
            "{prefix}: weights must be in [-127, 127] (symmetric int8)"
        );
        let packed = PackedWeights::new(w, n, k, scale.as_slice::<f32>()?, bias.as_slice::<f32>()?);
        model.wire_node(
            prefix,
            Int8Linear {
                w: Arc::new(packed),
            },
            &inputs[..1],
        )
    }
}

/// `y = x · Wᵀ + b` with int8 weights and per-token int8 activations ([`qgemm::linear`]).
#[derive(Clone, Debug)]
pub struct Int8Linear {
    w: Arc<PackedWeights>,
}

impl PartialEq for Int8Linear {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.w, &other.w) || self.w == other.w
    }
}

impl Eq for Int8Linear {}

impl Op for Int8Linear {
    fn name(&self) -> StaticName {
        OP_TYPE.into()
    }

    fn info(&self) -> TractResult<Vec<String>> {
        Ok(vec![format!(
            "int8 {}x{} ({})",
            self.w.out_features(),
            self.w.in_features(),
            qgemm::kernel_name()
        )])
    }

    fn validation(&self) -> Validation {
        Validation::Rounding
    }

    fn as_typed(&self) -> Option<&dyn TypedOp> {
        Some(self)
    }
}

thread_local! {
    /// Quantized activations: one buffer per thread, so a warm embed allocates none here.
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

impl EvalOp for Int8Linear {
    fn eval(&self, _ctx: &EvalContext, inputs: TVec<TValue>) -> TractResult<TVec<TValue>> {
        ensure!(inputs.len() == 1, "{OP_TYPE} takes one input");
        let x = &inputs[0];
        let (k, n) = (self.w.in_features(), self.w.out_features());
        let mut shape: TVec<usize> = x.shape().into();
        ensure!(
            shape.last() == Some(&k),
            "{OP_TYPE}: input {shape:?}, expected [.., {k}]"
        );
        let m = x.len() / k.max(1);
        if let Some(last) = shape.last_mut() {
            *last = n;
        }
        let mut y = Tensor::zero::<f32>(&shape)?;
        {
            let xv = x.try_as_plain_ram()?;
            let mut yv = y.try_as_plain_ram_mut()?;
            let (xs, ys) = (xv.as_slice::<f32>()?, yv.as_slice_mut::<f32>()?);
            SCRATCH.with_borrow_mut(|scratch| qgemm::linear(xs, m, &self.w, scratch, ys));
        }
        Ok(tvec![y.into_tvalue()])
    }

    fn eval_out_of_plan(&self, inputs: TVec<TValue>) -> TractResult<Option<TVec<TValue>>> {
        Ok(Some(self.eval(&EvalContext::out_of_plan(), inputs)?))
    }
}

impl TypedOp for Int8Linear {
    fn as_op(&self) -> &dyn Op {
        self
    }

    fn as_op_mut(&mut self) -> &mut dyn Op {
        self
    }

    fn output_facts(&self, inputs: &[&TypedFact]) -> TractResult<TVec<TypedFact>> {
        ensure!(inputs.len() == 1 && inputs[0].datum_type == f32::datum_type());
        let mut shape = inputs[0].shape.to_tvec();
        ensure!(
            shape.last() == Some(&self.w.in_features().to_dim()),
            "{OP_TYPE}: input {shape:?}, expected [.., {}]",
            self.w.in_features()
        );
        if let Some(last) = shape.last_mut() {
            *last = self.w.out_features().to_dim();
        }
        Ok(tvec![f32::fact(shape)])
    }
}
