// The compile pipeline: parse -> specialize -> clean-up passes -> PTX -> ptxas, and the
// interpreter entry. Every user error leaves here as a CompileFailure with rendered diagnostics.
#include "codegen/Codegen.h"
#include "frontend/Parser.h"
#include "interp/Interpreter.h"
#include "ir/OpAttrs.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/TritonDialects.h"
#include "layout/LayoutAssignment.h"
#include "layout/TritonEncodings.h"
#include "runtime/Ptxas.h"
#include "specialize/Specializer.h"
#include "transforms/Passes.h"
#include "warpweave/warpweave.h"

#include <iostream>
#include <sstream>

namespace ww {

const char* compilerVersion() {
  return "warpweave-0.1.0";
}

namespace {

/// The pieces of one compile that outlive it: the Tile IR keeps source locations that point into
/// the SourceManager, so the interpreter's diagnostics need it too.
struct CompiledModule {
  SourceManager sources;
  ir::Module module;
};

/// Each line of `text` indented by four spaces, each ending in a newline.
std::string indented(const std::string& text) {
  std::string out, line;
  std::istringstream in(text);
  while (std::getline(in, line)) out += "    " + line + "\n";
  return out;
}

/// One tlx.assert_same_layout, once its op has left the IR.
struct LayoutAssertion {
  const ir::Value* value;
  const ir::Value* other; // null: compare with `expected`
  std::vector<int64_t> regs, lanes, warps;
  SourceLoc loc;
};

/// tlx.assert_same_layout: the layout assigned to the value equals the other value's (a buffer's
/// allocation layout, padding and swizzle) or the register layout the kernel wrote; otherwise a
/// compile error at the call showing both.
void checkLayoutAssertion(const LayoutAssertion& a, const layout::LayoutMap& map) {
  auto fail = [&](const std::string& mine, const std::string& theirs) {
    throw CompileError(a.loc, "tlx.assert_same_layout failed: " + a.value->type().str() +
                                  " has the layout\n" + indented(mine) + "  where " + theirs);
  };
  if (a.value->type().kind == ir::TypeKind::Buffer) {
    const layout::SharedAllocation* x = map.sharedAllocation(a.value);
    const layout::SharedAllocation* y = map.sharedAllocation(a.other);
    if (!x || !y) throw CompileError(a.loc, "tlx.assert_same_layout: a buffer without a layout");
    if (!(x->layout == y->layout) || x->padding != y->padding || x->swizzleBytes != y->swizzleBytes)
      fail(x->layout.str(), "the other buffer has\n" + indented(y->layout.str()));
    return;
  }
  const layout::LinearLayout& mine = map.layout(a.value);
  layout::LinearLayout theirs =
      a.other ? map.layout(a.other)
              : layout::flatOffsetLayout(a.value->type().shape, a.regs, a.lanes, a.warps);
  if (!(mine == theirs))
    fail(mine.str(),
         (a.other ? "the other value has\n" : "the layout given is\n") + indented(theirs.str()));
}

/// tlx.dump_layout and tlx.assert_same_layout: the ops leave the IR (they move no data), then
/// the layouts the compiler assigns the kernel without them are printed to stderr, one remark
/// per dump, as CuTe text (layout/CuteText.cpp), and each assertion is checked. Layout
/// assignment is that of `options.target` at the kernel's warps, the one codegen runs again on
/// the same IR.
void dumpLayouts(ir::Function& fn, const CompileOptions& options, const SourceManager& sm) {
  std::vector<std::pair<const ir::Value*, SourceLoc>> dumps;
  std::vector<LayoutAssertion> assertions;
  std::vector<const ir::Op*> ops;
  ir::walk(fn.body, [&](const ir::Op& op) {
    if (op.code() == ir::OpCode::DumpLayout) {
      dumps.push_back({op.operand(0), op.loc()});
    } else if (op.code() == ir::OpCode::AssertSameLayout) {
      namespace A = ir::attr::AssertSameLayout;
      assertions.push_back({op.operand(0), A::hasRhs(op) ? op.operand(1) : nullptr,
                            A::regOffsets(op), A::laneOffsets(op), A::warpOffsets(op), op.loc()});
    } else {
      return;
    }
    ops.push_back(&op);
  });
  if (ops.empty()) return;
  for (const ir::Op* op : ops) ir::eraseOp(*op->parentBlock(), op);
  CompileOptions lo = options;
  lo.numWarps = fn.numWarps;
  layout::LayoutMap map = layout::assignLayouts(fn, lo);
  for (const LayoutAssertion& a : assertions) checkLayoutAssertion(a, map);
  for (const auto& [v, loc] : dumps) {
    std::ostringstream os;
    if (loc.valid()) os << sm.path(loc.file) << ":" << loc.line << ":" << loc.col << ": ";
    os << "remark: tlx.dump_layout of " << v->type().str() << " (" << targetName(options.target)
       << ", " << fn.numWarps << " warps)\n";
    if (v->type().kind == ir::TypeKind::Buffer) {
      const layout::SharedAllocation* a = map.sharedAllocation(v);
      const ir::Op* def = v->def();
      bool view =
          def && def->code() != ir::OpCode::LocalAlloc && def->code() != ir::OpCode::LocalView;
      std::string cute =
          a && a->layout.numOutDims() ? layout::cuteSharedLayoutText(a->layout, a->padding) : "";
      os << "  shared memory, "
         << (a && !a->userLayout.empty() ? "layout=" + a->userLayout
             : a && a->swizzleBytes      ? std::to_string(a->swizzleBytes) + "-byte NVMMA swizzle"
                                         : std::string("unswizzled"))
         << (view ? "; the layout of the allocation this view is taken from" : "") << "\n";
      if (a)
        for (const auto& [interval, pad] : a->padding)
          os << "  padding: " << pad << " elements after every " << interval
             << " (the linear map below is before padding)\n";
      os << "  cute: " << (cute.empty() ? "(not a strided or swizzled layout)" : cute) << "\n";
      if (a && a->layout.numOutDims()) os << "  linear:\n" << indented(a->layout.str());
    } else if (map.hasLayout(v)) {
      os << "  cute: " << layout::cuteRegisterLayoutText(map.layout(v)) << "\n";
      os << "  linear:\n" << indented(map.layout(v).str());
    }
    std::cerr << os.str() << std::flush;
  }
}

/// Thrown by compileWith when a kernel overflows shared memory after the pipeliner took an
/// attention loop on the guess that its epilogue fits over the loop's dead stages.
struct SharedMemoryGuessFailed {};

CompiledKernel compileWith(const CompileRequest& req, transforms::PipelineBudget& budget) {
  if (req.files.empty()) throw CompileFailure("error: no source files given");
  auto owner = std::make_shared<CompiledModule>();
  SourceManager& sm = owner->sources;
  CompiledKernel out;
  out.target = req.options.target;
  SourceLoc kernelLoc{0, 1, 1}; // the kernel's def once known, else the file's start
  try {
    std::vector<ast::Module> asts;
    asts.reserve(req.files.size());
    for (const SourceFile& f : req.files) {
      uint32_t id = sm.addFile(f.path, f.text);
      asts.push_back(frontend::parseModule(sm, id));
    }
    specialize::SpecializeInput in;
    in.sources = &sm;
    for (size_t i = 0; i < asts.size(); ++i) {
      in.modules.push_back(&asts[i]);
      in.names.push_back(req.files[i].names ? &*req.files[i].names : nullptr);
    }
    in.kernel = req.kernel;
    in.signature = req.signature;
    in.globals = req.globals;
    for (const auto& [name, text] : req.globals)
      in.globalFiles[name] = sm.addFile("<global " + name + ">", text);
    in.options = req.options;
    in.cudaTarget = req.stage != Stage::TileIR;
    std::unique_ptr<ir::Function> fn = specialize::specialize(in);
    if (fn->loc.valid()) kernelLoc = fn->loc;
    // Loads and stores through descriptors made in the kernel that cannot be tensor maps (or
    // on sm_80, without TMA) become pointer accesses before the loop passes, so that the
    // pipeliner stages them as it stages tl.load; the others stay TMA copies, pipelined as host
    // descriptors' are (the interpreter runs the tile IR with the descriptors themselves).
    if (req.stage != Stage::TileIR)
      transforms::lowerDeviceDescriptors(*fn, req.options.target != Target::SM80);
    transforms::runCleanupPipeline(*fn);
    if (transforms::combineDotAdd(*fn)) transforms::runCleanupPipeline(*fn);
    // The MMA lowerings are 2-D; the interpreter runs batched dots whole.
    if (req.stage != Stage::TileIR && transforms::decomposeBatchedDots(*fn))
      transforms::runCleanupPipeline(*fn);
    if (transforms::hoistLoopInvariants(*fn)) transforms::runCleanupPipeline(*fn);
    if (transforms::narrowCarriedCasts(*fn)) transforms::runCleanupPipeline(*fn);
    // wgmma and tcgen05.mma read their operands from shared memory: stage them there ahead of
    // the MMA.
    // Loops marked warp_specialize=True become a TMA producer task and MMA consumer tasks
    // first (persistent tile loops; one-tile K loops measured faster pipelined); the pipeliner
    // leaves a kernel with tasks to them.
    if (req.options.target == Target::SM90a &&
        transforms::warpSpecializeDotLoops(*fn, /*oneTileLoops=*/false))
      transforms::runCleanupPipeline(*fn);
    if (req.options.target == Target::SM90a && transforms::pipelineDotLoops(*fn))
      transforms::runCleanupPipeline(*fn);
    if (req.options.target == Target::SM100a &&
        transforms::pipelineDotLoops(*fn, /*tensorMemory=*/true, &budget))
      transforms::runCleanupPipeline(*fn);
    if (transforms::unrollLoops(*fn)) transforms::runCleanupPipeline(*fn);
    // cp.async address tensors the loops carry become entry pointers plus a scalar offset.
    if (transforms::offsetLoopPointers(*fn)) transforms::runCleanupPipeline(*fn);
    // Last: the barriers follow the accesses the passes above leave.
    transforms::insertSharedMemoryBarriers(*fn);
    dumpLayouts(*fn, req.options, sm);
    out.tileIR = ir::print(*fn);
    for (const SignatureEntry& e : req.signature) {
      bool kept = false;
      for (const ir::KernelArg& a : fn->args)
        if (a.name == e.name && a.value) kept = true;
      if (!kept) out.foldedArgs.push_back(e.name);
    }
    out.name = fn->name;
    out.numWarps = fn->numWarps;
    out.numCtas = fn->numCtas;
    out.clusterDims = fn->clusterDims;
    if (req.stage != Stage::TileIR) {
      codegen::PtxKernel ptx = codegen::emitPtx(*fn, req.options, &sm);
      out.ptx = std::move(ptx.ptx);
      out.name = ptx.entry;
      out.numWarps = ptx.numWarps;
      out.sharedBytes = ptx.sharedBytes;
      out.globalScratchBytes = ptx.globalScratchBytes;
      out.params = std::move(ptx.params);
    }
    owner->module.functions.push_back(std::move(fn));
    owner->module.sources = &sm;
  } catch (CompileError& e) {
    if (budget.usedRoomOverDeadStages &&
        e.diagnostic().message.find(codegen::kSharedMemoryOverflow) != std::string::npos)
      throw SharedMemoryGuessFailed{};
    // Every error names a place in the source: one raised on an op the compiler made (without
    // a location of its own) points at the kernel.
    if (!e.diagnostic().loc.valid()) {
      CompileError located(kernelLoc, e.diagnostic().message, e.diagnostic().notes);
      located.render(sm);
      throw CompileFailure(located.what());
    }
    e.render(sm);
    throw CompileFailure(e.what());
  }
  if (req.stage == Stage::Cubin) {
    runtime::PtxasResult r = runtime::runPtxas(out.ptx, req.options.target, out.name);
    if (!r.ok) { // located at the kernel, as every error of a compile is
      CompileError e(kernelLoc, "ptxas rejected kernel '" + out.name + "' for " +
                                    targetName(req.options.target) + ":\n" + r.log);
      e.render(sm);
      throw CompileFailure(e.what());
    }
    out.cubin = std::move(r.cubin);
    out.registers = r.registers;
    out.spillBytes = r.spillBytes;
    out.ptxasLog = std::move(r.log);
  }
  // Alias the module into the shared owner so the SourceManager lives as long as the IR.
  out.module = std::shared_ptr<ir::Module>(owner, &owner->module);
  return out;
}

} // namespace

CompiledKernel compile(const CompileRequest& req) {
  transforms::PipelineBudget budget;
  try {
    return compileWith(req, budget);
  } catch (const SharedMemoryGuessFailed&) {
    // The loop used the scratch region after all (a layout conversion the pipeliner could not
    // foresee): compile again with the epilogue's room kept beside the stages.
    transforms::PipelineBudget kept;
    kept.roomOverDeadStages = false;
    return compileWith(req, kept);
  }
}

std::string tritonDialectText(const std::string& tileIR, const std::string& target,
                              bool withLayouts) {
  SourceManager sm;
  uint32_t file = sm.addFile("<tile-ir>", tileIR);
  try {
    std::unique_ptr<ir::Function> fn = ir::parseFunction(sm, file);
    if (!withLayouts) return ir::printTritonDialects(*fn, target);
    // The layouts code generation assigns for this target (as it runs layout assignment again on
    // the same IR).
    CompileOptions options;
    options.target = parseTarget(target);
    options.numWarps = fn->numWarps;
    layout::LayoutMap map = layout::assignLayouts(*fn, options);
    layout::LayoutMapEncodings encodings(map);
    return ir::printTritonDialects(*fn, target, &encodings);
  } catch (CompileError& e) {
    e.render(sm);
    throw CompileFailure(e.what());
  }
}

void interpret(const CompiledKernel& kernel, const int grid[3], const std::vector<InterpArg>& args,
               const HostMemoryLookup& hostMemory) {
  if (!kernel.module || kernel.module->functions.empty())
    throw std::invalid_argument("interpret: the kernel has no Tile IR");
  for (int i = 0; i < 3; ++i)
    if (grid[i] < 0) throw std::invalid_argument("interpret: grid dimensions must be >= 0");
  interp::RunOptions options = interp::runOptionsFromEnvironment();
  options.hostMemory = hostMemory;
  interp::run(*kernel.module->functions.front(), kernel.module->sources, grid, args, options);
}

} // namespace ww
