#include "ir/OpTraits.h"

namespace ww::ir {

bool isBinaryArithmetic(OpCode c) {
  switch (c) {
  case OpCode::Add:
  case OpCode::Sub:
  case OpCode::Mul:
  case OpCode::Div:
  case OpCode::Rem:
  case OpCode::FloorDiv:
  case OpCode::And:
  case OpCode::Or:
  case OpCode::Xor:
  case OpCode::Shl:
  case OpCode::Shr:
  case OpCode::Max:
  case OpCode::Min:
  case OpCode::Pow:
    return true;
  default:
    return false;
  }
}

bool isUnaryMath(OpCode c) {
  switch (c) {
  case OpCode::Neg:
  case OpCode::Not:
  case OpCode::Exp:
  case OpCode::Exp2:
  case OpCode::Log:
  case OpCode::Log2:
  case OpCode::Sqrt:
  case OpCode::Rsqrt:
  case OpCode::Abs:
  case OpCode::Sin:
  case OpCode::Cos:
  case OpCode::Tanh:
  case OpCode::Erf:
  case OpCode::Floor:
  case OpCode::Ceil:
  case OpCode::Sigmoid:
    return true;
  default:
    return false;
  }
}

bool isValueHint(OpCode c) {
  return c == OpCode::MultipleOf || c == OpCode::MaxContiguous;
}

bool isElementwise(OpCode c) {
  if (isBinaryArithmetic(c) || isUnaryMath(c) || isValueHint(c)) return true;
  switch (c) {
  case OpCode::AddPtr:
  case OpCode::Cmp:
  case OpCode::Select:
  case OpCode::Fma:
  case OpCode::Umulhi:
  case OpCode::Cast:
  case OpCode::Bitcast:
  case OpCode::PtrToInt:
  case OpCode::IntToPtr:
    return true;
  default:
    return false;
  }
}

bool isShapeOp(OpCode c) {
  switch (c) {
  case OpCode::Splat:
  case OpCode::Broadcast:
  case OpCode::ExpandDims:
  case OpCode::Reshape:
  case OpCode::Permute:
  case OpCode::Join:
  case OpCode::Split:
  case OpCode::Cat:
    return true;
  default:
    return false;
  }
}

bool isBufferView(OpCode c) {
  switch (c) {
  case OpCode::LocalView:
  case OpCode::LocalTrans:
  case OpCode::LocalSlice:
  case OpCode::LocalReinterpret:
    return true;
  default:
    return false;
  }
}

bool lowersWithAgentBarrier(OpCode c) {
  switch (c) {
  case OpCode::DebugBarrier:
  case OpCode::LocalStore:
  case OpCode::LocalScatter:
  case OpCode::AsyncWaitGroup:
  case OpCode::AsyncDescStore:
  case OpCode::AsyncBulkStore:
  case OpCode::AsyncDescStoreWait:
  case OpCode::AllocBarriers:
  case OpCode::ClusterBarrier:
  case OpCode::DescLoad:
  case OpCode::DescStore:
  case OpCode::BarrierArrive:
  case OpCode::AsyncRemoteStore:
  case OpCode::RemoteStore:
  case OpCode::AsyncRemoteCopy:
    return true;
  default:
    return false;
  }
}

bool accessesSharedBuffers(OpCode c) {
  switch (c) {
  case OpCode::LocalLoad:
  case OpCode::LocalStore:
  case OpCode::LocalGather:
  case OpCode::LocalScatter:
  case OpCode::AsyncLoad:
  case OpCode::AsyncDescLoad:
  case OpCode::AsyncDescStore:
  case OpCode::AsyncBulkLoad:
  case OpCode::AsyncBulkStore:
  case OpCode::AsyncDot:
  case OpCode::AsyncDotWait:
  case OpCode::AsyncWaitGroup:
  case OpCode::AsyncDescStoreWait:
  case OpCode::AsyncRemoteStore:
  case OpCode::RemoteStore:
  case OpCode::AsyncRemoteCopy:
    return true;
  default:
    return false;
  }
}

std::string remoteStoreWithoutClusterMessage(const Op& op) {
  return std::string("tlx.") + op.name() +
         " needs a cluster launch: launch with ctas_per_cga=(n, 1, 1), n >= 2, or another shape "
         "of 2 or more CTAs (the GPU refuses distributed shared memory stores outside a cluster, "
         "even into the CTA's own shared memory, which tlx.local_store writes)";
}

} // namespace ww::ir
