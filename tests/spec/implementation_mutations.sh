#!/usr/bin/env bash
# Implementation mutations: each one a plausible bug in what spec/tinyspec.tex describes, applied
# in a scratch clone of the repository (its committed HEAD), one at a time; after each the spec
# test binary is rebuilt and run, and must fail. Reports each mutation as detected (the spec tests
# fail), UNDETECTED (they pass) or invalid (it does not compile; not counted), and the detection
# rate. Exit status 0 when every valid mutation is detected, 1 when one is not, 2 on a script error
# (a mutation whose text is not found or that changes nothing, or a failing unmutated build/run).
#
#   tests/spec/implementation_mutations.sh [SCRATCH_DIR]
#
# SCRATCH_DIR (default: mktemp -d) must be empty or absent; it is kept afterwards, with the log of
# every build and test run under SCRATCH_DIR/mutation-logs. ONLY=name1,name2 runs only those;
# DRY_RUN=1 only checks that each mutation applies to the clone (no build, no tests).
# The test binary runs as ctest runs it (SPEC=1: the verifiers after every pipeline stage), with
# TINYSPEC_PATH unset, so it reads the scratch copy's spec/tinyspec.tex; a run past the time limit
# (3x the unmutated run, at least 5 minutes) counts as detected, as ctest would fail it.
set -u
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
scratch=${1:-$(mktemp -d)}
if [ -e "$scratch" ] && [ -n "$(ls -A "$scratch")" ]; then
  echo "error: $scratch is not empty" >&2
  exit 2
fi
mkdir -p "$scratch"
scratch=$(cd "$scratch" && pwd)
logs=$scratch/mutation-logs
bin=$scratch/build/bin/test_spec
jobs=${JOBS:-2}
# ccache hits across scratch copies: paths relative to the copy, the directory left out of the hash
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$scratch} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}

git clone -q "$repo" "$scratch" || exit 2
mkdir -p "$logs"
echo "scratch copy of $(git -C "$scratch" log --oneline -1) in $scratch"

build() {  # LOG: rebuild the spec test binary (ccache serves unchanged translation units)
  nice -n 10 cmake --build "$scratch/build" --target test_spec -j "$jobs" >"$1" 2>&1
}
run_tests() {  # LOG LIMIT: the spec tests as ctest runs them; the exit status
  (cd "$scratch/build" && env -u TINYSPEC_PATH SPEC=1 nice -n 10 timeout -k 10 "$2" "$bin" >"$1" 2>&1)
}

start=$SECONDS
limit=0
if [ -z "${DRY_RUN:-}" ]; then
  nice -n 10 cmake -S "$scratch" -B "$scratch/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    >"$logs/configure.log" 2>&1 || { echo "error: configure failed, see $logs/configure.log" >&2; exit 2; }
  if ! build "$logs/build-unmutated.log"; then
    echo "error: the unmutated build failed, see $logs/build-unmutated.log" >&2
    exit 2
  fi
  echo "unmutated build: $((SECONDS - start)) s"
  t0=$SECONDS
  if ! run_tests "$logs/test-unmutated.log" 3600; then
    echo "error: the unmutated spec tests fail, see $logs/test-unmutated.log" >&2
    exit 2
  fi
  baseline=$((SECONDS - t0))
  limit=$((3 * baseline > 300 ? 3 * baseline : 300))
  echo "unmutated spec tests pass in $baseline s (limit per mutated run: $limit s)"
fi

results=()
script_error=0
detected=0
valid=0

# The OLD texts (each must occur exactly once in FILE) become the NEW texts.
replace() {  # FILE OLD NEW [OLD NEW]...
  python3 - "$@" <<'EOF'
import sys
path, pairs = sys.argv[1], sys.argv[2:]
text = open(path).read()
for old, new in zip(pairs[::2], pairs[1::2]):
    n = text.count(old)
    if n != 1:
        sys.exit(f"the text to replace occurs {n} times in {path}: {old!r}")
    text = text.replace(old, new)
open(path, "w").write(text)
EOF
}

mutation() {  # NAME FILE OLD NEW [OLD NEW]...
  local name=$1 file=$2
  shift 2
  if [ -n "${ONLY:-}" ] && [[ ",$ONLY," != *",$name,"* ]]; then return; fi
  local t=$SECONDS status detail=""
  if ! replace "$scratch/$file" "$@" 2>"$logs/$name.replace.log"; then
    status="ERROR"
    detail="$(cat "$logs/$name.replace.log")"
    script_error=1
  elif git -C "$scratch" diff --quiet -- "$file"; then
    status="ERROR"
    detail="the mutation changed nothing in $file"
    script_error=1
  elif [ -n "${DRY_RUN:-}" ]; then
    status="applies"
  elif ! build "$logs/$name.build.log"; then
    status="invalid"
    detail="does not compile: $(grep -m1 -E 'error' "$logs/$name.build.log" | cut -c1-160)"
  else
    valid=$((valid + 1))
    run_tests "$logs/$name.test.log" "$limit"
    local rc=$?
    if [ $rc -eq 0 ]; then
      status="UNDETECTED"
    else
      status="detected"
      detected=$((detected + 1))
      if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        detail="timed out after $limit s"
      elif [ $rc -gt 128 ]; then
        detail="crashed (signal $((rc - 128))) in $(grep -E '^\[ RUN      \]' "$logs/$name.test.log" | tail -1 | cut -c14-)"
      else
        detail="failed: $(grep -E '^\[  FAILED  \] [A-Za-z]' "$logs/$name.test.log" | sed 's/^\[  FAILED  \] //; s/,.*//; s/ (.*//' | sort -u | tr '\n' ' ')"
      fi
    fi
  fi
  git -C "$scratch" checkout -q -- "$file"
  results+=("$name: $status")
  echo "[$((SECONDS - t)) s] $name ($file): $status${detail:+ - $detail}"
}

# ---- INTERP's arithmetic (ir/alu.cpp exec_alu, cast_value, threefry2x32; runtime/interp.cpp) ----
# a signed right shift rounds toward zero instead of toward -inf (-7 >> 1 gives -3)
mutation interp_shr_rounds_toward_zero ir/alu.cpp \
  'return wrap(floor_div(v(0), static_cast<i128>(1) << static_cast<int>(v(1))));' \
  'return wrap(trunc_div(v(0), static_cast<i128>(1) << static_cast<int>(v(1))));'
# an integer Add is not wrapped to its dtype (int8 127 + 1 stays 128 in the register)
mutation interp_add_not_wrapped ir/alu.cpp \
  'return wrap(sat_add(v(0), v(1)));' \
  'return Arg::integer(sat_add(v(0), v(1)));'
# a float cast to an integer rounds to nearest (even) instead of truncating
mutation interp_float_to_int_rounds_to_nearest ir/alu.cpp \
  'truncate_int(s, static_cast<i128>(std::trunc(f)))' \
  'truncate_int(s, static_cast<i128>(std::nearbyint(f)))'
# Max ignores NaN (max(nan, 1.0) gives 1.0)
mutation interp_max_ignores_nan ir/alu.cpp \
  'std::isnan(v(0)) || std::isnan(v(1)) ? NAN : v(0) > v(1) ? v(0) : v(1)' \
  'v(0) > v(1) ? v(0) : v(1)'
# CMod takes the divisor's sign (a floor remainder) instead of the dividend's
mutation interp_cmod_is_floor_mod ir/alu.cpp \
  ': trunc_mod(v(0), v(1));' \
  ': floor_mod(v(0), v(1));'
# NaN != NaN gives False (an ordered not-equal)
mutation interp_cmpne_nan_false ir/alu.cpp \
  'return Arg::boolean(unordered || c != 0);' \
  'return Arg::boolean(!unordered && c != 0);'
# ThreeFry's last rotation constant 24 becomes 23
mutation interp_threefry_rotation ir/alu.cpp \
  '{13, 15, 26, 6, 17, 29, 16, 24}' \
  '{13, 15, 26, 6, 17, 29, 16, 23}'
# 64-bit products leave the modular path: a uint64 product past i128 saturates and raises
mutation interp_wide_product_not_modular runtime/interp.cpp \
  'if ((u.op() == Op::Mul || u.op() == Op::MulAcc) && u.dtype().is_int()) {' \
  'if ((u.op() == Op::Mul || u.op() == Op::MulAcc) && u.dtype().is_int() && u.dtype().itemsize() < 8) {'
# a gated load reads where its gate is false and gives the alternative where it holds
mutation interp_gated_load_inverted runtime/interp.cpp \
  'if (u.nsrc() == 3 && !value(u.src(2)).as_bool()) {' \
  'if (u.nsrc() == 3 && value(u.src(2)).as_bool()) {'

# ---- the CPU renderer (runtime/llvm_render.cpp) ----
# a signed right shift is logical (-128 >> 7 gives 1 at int8)
mutation cpu_signed_shr_is_lshr runtime/llvm_render.cpp \
  'return bin(un ? "lshr" : "ashr", "ashr");' \
  'return bin("lshr", "ashr");'
# the range check of a float->int cast lets NaN through (unordered compares): NaN no longer gives 0
mutation cpu_cast_of_nan_not_zero runtime/llvm_render.cpp \
  'line(fmt::format("{} = fcmp ogt {} {}, {}", lo, ft, x,' \
  'line(fmt::format("{} = fcmp ugt {} {}, {}", lo, ft, x,' \
  'line(fmt::format("{} = fcmp olt {} {}, {}", hi, ft, x, bound));' \
  'line(fmt::format("{} = fcmp ult {} {}, {}", hi, ft, x, bound));'
# a float CmpLt with NaN gives True (fcmp ult for olt)
mutation cpu_cmplt_nan_true runtime/llvm_render.cpp \
  'fmt::format("{} = fcmp olt {} {}, {}", r, st, a[0], a[1])' \
  'fmt::format("{} = fcmp ult {} {}, {}", r, st, a[0], a[1])'
# float Max picks a where a >= b (max(-0.0, 0.0) gives -0.0)
mutation cpu_max_of_zeros_takes_first runtime/llvm_render.cpp \
  'fmt::format("{} = fcmp ogt {} {}, {}", c, t, a[0], a[1])' \
  'fmt::format("{} = fcmp oge {} {}, {}", c, t, a[0], a[1])'
# unsigned Max compares signed (max(200, 3) gives 3 at uint8)
mutation cpu_unsigned_max_signed runtime/llvm_render.cpp \
  'c, un ? "ugt" : "sgt", t, a[0], a[1])' \
  'c, "sgt", t, a[0], a[1])'
# bfloat16 results are truncated instead of rounded to nearest even
mutation cpu_bfloat16_truncates runtime/llvm_render.cpp \
  'line(fmt::format("{} = add i32 {}, {}", sum, u, bias));' \
  'line(fmt::format("{} = add i32 {}, 0", sum, u));'
# INT_MIN / -1 is no longer guarded: the division traps instead of wrapping
mutation cpu_int_min_div_minus_one_unguarded runtime/llvm_render.cpp \
  'guard = g;' \
  'guard = z;'
# an unsigned integer is converted to float as signed (uint32 4294967295 gives -1.0)
mutation cpu_unsigned_to_float_signed runtime/llvm_render.cpp \
  'from.is_unsigned() || from.is_bool() ? "uitofp" : "sitofp"' \
  'from.is_bool() ? "uitofp" : "sitofp"'

# ---- float rounding (ir/dtype.cpp) ----
# float16 results are truncated instead of rounded to nearest even (2048 + 3 gives 2050)
mutation float16_truncates ir/dtype.cpp \
  'r = (r + 0xfff + ((r >> 13) & 1)) >> 13;' \
  'r = r >> 13;'
# bfloat16 rounds ties away from zero instead of to even (256 + 1 gives 258)
mutation bfloat16_ties_away ir/dtype.cpp \
  'u = u + 0x7fff + ((u >> 16) & 1);' \
  'u = u + 0x8000;'

# ---- derived ranges, shapes, devices (ir/properties.cpp) ----
# Add's vmax one wider than A + B
mutation range_add_one_wider ir/properties.cpp \
  'return int_bounds(sat_add(a, b), sat_add(A, B));' \
  'return int_bounds(sat_add(a, b), sat_add(sat_add(A, B), 1));'
# Max's vmax max(A, b) instead of max(A, B): unsound
mutation range_max_unsound ir/properties.cpp \
  'return int_bounds(std::max(a, b), std::max(A, B));' \
  'return int_bounds(std::max(a, b), std::max(A, b));'
# CMod by a constant k: vmax k instead of k - 1
mutation range_cmod_one_wider ir/properties.cpp \
  'const i128 hi = A < 0 ? 0 : A < k ? A : k - 1;' \
  'const i128 hi = A < 0 ? 0 : A < k ? A : k;'
# Shl by a constant: vmax A instead of A * 2**b: unsound
mutation range_shl_unsound ir/properties.cpp \
  'return int_bounds(sat_mul(a, m), sat_mul(A, m));' \
  'return int_bounds(sat_mul(a, m), A);'
# And with a constant b >= 0 of a possibly negative source: vmax min(A, b) instead of b: unsound
mutation range_and_unsound ir/properties.cpp \
  'return a < 0 ? int_bounds(0, b) : int_bounds(0, std::min(A, b));' \
  'return int_bounds(0, std::min(A, b));'
# CMod by a non-constant positive divisor in [b, B] of x >= 0: vmax B instead of B - 1
mutation range_cmod_variable_divisor_wider ir/properties.cpp \
  'if (a >= 0) return int_bounds(0, sat_sub(m, 1));' \
  'if (a >= 0) return int_bounds(0, m);'
# a Cast whose source reaches the dtype's largest value is taken to wrap (the whole dtype range)
mutation range_cast_at_max_wraps ir/properties.cpp \
  'if (a >= dt.int_min() && A <= dt.int_max()) return int_bounds(a, A);' \
  'if (a >= dt.int_min() && A < dt.int_max()) return int_bounds(a, A);'
# a Copy is on its source's device instead of the one in its arg
mutation device_copy_from_source ir/properties.cpp \
  $'    case Op::Copy:\n      return u.arg();' \
  $'    case Op::Copy:\n      return src_dev(0);'
# After takes the first device among its sources instead of source 0's
mutation device_after_first_source ir/properties.cpp \
  $'    case Op::After:\n      return src_dev(0);\n' \
  ''
# MSelect always selects device 0 of its source
mutation device_mselect_first ir/properties.cpp \
  'return d.items()[static_cast<size_t>(k)];' \
  'return d.items()[0];'
# Stack checks only that its sources have equal ranks, not equal shapes
mutation shape_stack_ranks_only ir/properties.cpp \
  'if (src_shape(u, i) != s0) shape_error(u, "sources of a stack must have equal shapes");' \
  'if (src_shape(u, i).size() != s0.size()) shape_error(u, "sources of a stack must have equal shapes");'
# Index puts the axes it does not index before the index sources' shapes instead of after them
mutation shape_index_axes_order ir/properties.cpp \
  'out.insert(out.end(), base.begin() + static_cast<long>(u.nsrc() - 1), base.end());' \
  'out.insert(out.begin(), base.begin() + static_cast<long>(u.nsrc() - 1), base.end());'
# Index's "too many indices" check removed (the surplus indices clamped)
mutation shape_index_too_many_accepted ir/properties.cpp \
  $'      if (u.nsrc() - 1 > base.size()) shape_error(u, "too many indices");\n      out.insert(out.end(), base.begin() + static_cast<long>(u.nsrc() - 1), base.end());' \
  $'      out.insert(out.end(), base.begin() + static_cast<long>(std::min(u.nsrc() - 1, base.size())), base.end());'

# ---- the verifiers (rules/spec.rw) ----
# a comparison of any result dtype is accepted (not only bool)
mutation verify_comparison_not_bool rules/spec.rw \
  '=> require(x.dtype.is_bool && a.dtype == b.dtype,' \
  '=> require(a.dtype == b.dtype,'
# a Where with a condition of any dtype is accepted
mutation verify_where_any_condition rules/spec.rw \
  '=> require(c.dtype.is_bool && t.dtype == x.dtype && f.dtype == x.dtype,' \
  '=> require(t.dtype == x.dtype && f.dtype == x.dtype,'
# a Where with an integer condition is accepted (C truthiness)
mutation verify_where_int_condition rules/spec.rw \
  '=> require(c.dtype.is_bool && t.dtype == x.dtype && f.dtype == x.dtype,' \
  '=> require((c.dtype.is_bool || c.dtype.is_int) && t.dtype == x.dtype && f.dtype == x.dtype,'
# a float unary op (Sqrt, Exp2, ...) at an integer dtype is accepted
mutation verify_float_unary_at_int rules/spec.rw \
  $'    require(x.dtype.is_float, "needs a float dtype")\n' \
  ''
# a kernel REDUCE with op And is accepted
mutation verify_reduce_and rules/spec.rw \
  'a[0] in (Add, Mul, Max) && a[1] == 0' \
  'a[0] in (Add, Mul, Max, And) && a[1] == 0'

# ---- the late decompositions (rules/decompositions.rw): CPU's FloorDiv, FloorMod, ThreeFry ----
# FloorDiv's correction goes the wrong way (q + 1 where the quotient was rounded up)
mutation floordiv_corrects_upward rules/decompositions.rw \
  '.where(q - 1, q)' \
  '.where(q + 1, q)'
# FloorMod's correction subtracts the divisor instead of adding it
mutation floormod_wrong_sign rules/decompositions.rw \
  'else r + rounds_down(r, a, b)' \
  'else r - rounds_down(r, a, b)'
# the correction applies to exact quotients too (-6 // 2 gives -4)
mutation floordiv_corrects_exact_quotients rules/decompositions.rw \
  'def rounds_down(r: uop, a: uop, b: uop) = r.ne(0) & (a < 0).ne(b < 0)' \
  'def rounds_down(r: uop, a: uop, b: uop) = (a < 0).ne(b < 0)'
# ThreeFry's lowering: the first set's last rotation 6 becomes 7
mutation cpu_threefry_rotation rules/decompositions.rw \
  '(13, 15, 26, 6) if s % 2 == 1' \
  '(13, 15, 26, 7) if s % 2 == 1'
# ThreeFry's lowering: the key injection no longer adds its counter s
mutation cpu_threefry_injection_counter rules/decompositions.rw \
  '(w[0] + ks[s % 3], w[1] + ks[(s + 1) % 3] + s)' \
  '(w[0] + ks[s % 3], w[1] + ks[(s + 1) % 3])'
# truncating division of a possibly negative x by a constant 2^k adds 2^k instead of 2^k - 1
mutation cdiv_pow2_signed_bias rules/decompositions.rw \
  'x.const_like(c.arg - 1), x.const_like(0))) >> log2_int(c.arg)' \
  'x.const_like(c.arg), x.const_like(0))) >> log2_int(c.arg)'

# ---- opts (codegen/opt.cpp) ----
# UPCAST may split off 17 lanes
mutation opt_upcast_17 codegen/opt.cpp \
  'check(amount <= 16, opt,' \
  'check(amount <= 17, opt,'
# UNROLL may split off 64 lanes
mutation opt_unroll_64 codegen/opt.cpp \
  'check(amount <= 32, opt,' \
  'check(amount <= 64, opt,'
# UNROLL applies to output axes too
mutation opt_unroll_output_axis codegen/opt.cpp \
  'if (is_reduce_axis(t) && size_of(r) > 1) candidates.push_back(r);' \
  'if (size_of(r) > 1) candidates.push_back(r);' \
  'check(is_reduce_axis(t), opt, "unroll is for reduce ranges");' \
  'check(is_reduce_axis(t) || is_output_axis(t), opt, "unroll is for reduce ranges");'
# LOCAL applies on targets without workgroups (CPU, INTERP)
mutation opt_local_without_workgroups codegen/opt.cpp \
  'if (opt.op == OptOp::Local || opt.op == OptOp::Group || opt.op == OptOp::GroupTop)' \
  'if (opt.op == OptOp::Group || opt.op == OptOp::GroupTop)'

# ---- the Tensor front end, scheduling, kernels, calls ----
# a narrowing bitcast (int32 -> int8) is accepted: Bitcast changes the item size
mutation tensor_bitcast_narrowing tensor/tensor.cpp \
  'if (d.itemsize() != dtype().itemsize()) {' \
  'if (d.itemsize() > dtype().itemsize()) {'
# a Max (and Mul) over an empty axis gives 0 instead of its identity
mutation empty_reduce_not_identity rules/rangeify.rw \
  '=> const_shaped(r, identity(r.arg[0], r.dtype))' \
  '=> const_shaped(r, 0 if r.arg[0] != Mul else 1)'
# an accumulator register BUFFER's addrspace is written as GLOBAL
mutation register_buffer_global rules/helpers/kernel.cpp \
  'addrspace_name(AddrSpace::Reg)' \
  'addrspace_name(AddrSpace::Global)'
# call_access leaves a read-modify-write slot out of the reads (ProgramInfo ins)
mutation rmw_slot_not_read ir/call.cpp \
  'out.reads.insert(param_slot(*base_param(s)));' \
  'if (!out.writes.contains(param_slot(*base_param(s)))) out.reads.insert(param_slot(*base_param(s)));'

echo
echo "results ($((SECONDS - start)) s in all):"
printf '%s\n' "${results[@]}"
echo "detection rate: $detected/$valid ($(awk -v d=$detected -v n=$valid 'BEGIN { printf "%.1f", n ? 100 * d / n : 0 }')%)"
[ $script_error -ne 0 ] && exit 2
[ $detected -eq $valid ] && exit 0
exit 1
