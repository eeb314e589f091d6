// Which ops have side effects: the one table fold, CSE and DCE consult.
#include "transforms/Passes.h"

namespace ww::transforms {

using ir::OpCode;

bool isPure(const ir::Op& op) {
  switch (op.code()) {
  case OpCode::Constant:
  case OpCode::ProgramId:
  case OpCode::NumPrograms:
  case OpCode::Arange:
  case OpCode::Splat:
  case OpCode::Broadcast:
  case OpCode::ExpandDims:
  case OpCode::Reshape:
  case OpCode::Permute:
  case OpCode::Join:
  case OpCode::Split:
  case OpCode::Cat:
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
  case OpCode::AddPtr:
  case OpCode::Neg:
  case OpCode::Not:
  case OpCode::Cmp:
  case OpCode::Select:
  case OpCode::Fma:
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
  case OpCode::Umulhi:
  case OpCode::Cast:
  case OpCode::Bitcast:
  case OpCode::PtrToInt:
  case OpCode::IntToPtr:
  case OpCode::Dot:
  case OpCode::MultipleOf:
  case OpCode::MaxContiguous:
  case OpCode::LocalView:
  case OpCode::LocalTrans:
  case OpCode::LocalSlice:
  case OpCode::LocalReinterpret:
  case OpCode::ReplicaId:
  case OpCode::ThreadId:
  case OpCode::ClusterCtaRank:
  case OpCode::ClusterSize:
    return true;
  case OpCode::Reduce:
  case OpCode::Scan:
    // Pure when the combine region is (it only ever holds arithmetic and a yield).
    for (unsigned r = 0; r < op.numRegions(); ++r)
      for (const auto& inner : op.region(r)->ops())
        if (inner->code() != OpCode::Yield && !isPure(*inner)) return false;
    return true;
  default:
    return false;
  }
}

} // namespace ww::transforms
