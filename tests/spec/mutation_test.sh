#!/usr/bin/env bash
# Removing or altering a row of spec/tinyspec.tex must make a spec test fail: each mutation of a
# copy of the document is checked with the spec tests, which must then fail. (The implementation's
# side: tests/spec/implementation_mutations.sh, which rebuilds a scratch clone for each mutation.)
set -u
test_spec=$1
doc=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
mutate() {  # NAME FILTER SED-EXPRESSION
  sed "$3" "$doc" > "$work/$1.tex"
  if cmp -s "$doc" "$work/$1.tex"; then echo "mutation $1 changed nothing"; fail=1; return; fi
  if TINYSPEC_PATH="$work/$1.tex" "$test_spec" --gtest_filter="$2" > "$work/$1.log" 2>&1; then
    echo "mutation $1: the spec tests still pass"; fail=1
  else
    echo "mutation $1: detected"
  fi
}
mutate remove_add_row 'Spec.OpsTable*' '/^\\op{Add} & elementwise binary/d'
mutate wrong_arity 'Spec.OpsTable*' 's/^\\op{Where} & elementwise ternary & 3/\\op{Where} \& elementwise ternary \& 2/'
mutate extra_op 'Spec.OpsTable*' 's/^\\op{Mul} & elementwise binary & 2 \(.*\)$/&\n\\op{Frobnicate} \& elementwise binary \& 2 \& made up \\\\/'
mutate wrong_formula 'Devices/SpecSemantics.*/INTERP' 's/^\\op{Add} & int float bool & \\sem{a + b}/\\op{Add} \& int float bool \& \\sem{a - b}/'
mutate wrong_floor 'Devices/SpecSemantics.*/INTERP' 's/\\sem{floor(a \/ b)}/\\sem{trunc(a \/ b)}/'
mutate wrong_range 'Spec.Ranges*' 's/\\sem{\[a + b, A + B\]}/\\sem{[a + b + 1, A + B]}/'
mutate wrong_shape 'Spec.Shapes*' 's/^\\op{Reshape} & \\sem{s1}/\\op{Reshape} \& \\sem{s0}/'
mutate wrong_shape_condition 'Spec.Shapes*' 's/s1\[k\] + s0\[k\] <= s2\[k\]/s1[k] + s0[k] < s2[k]/'
mutate remove_shape_row 'Spec.Shapes*' '/^\\op{Permute} & \\sem{permute/d'
mutate remove_axis_row 'Spec.AxisTypes*' '/^\\sem{UNROLL} & r/d'
mutate wrong_axis_letter 'Spec.AxisTypes*' 's/^\\sem{REDUCE} & R & 4/\\sem{REDUCE} \& r \& 4/'
mutate wrong_axis_position 'Spec.AxisTypes*' 's/^\\sem{UPCAST} & u & 3/\\sem{UPCAST} \& u \& 2/'
mutate remove_kernel_ast_row 'Spec.KernelAst*' '/^spec\\_kernel\\_ast.group &/d'
mutate wrong_kernel_ast_message 'Spec.KernelAst*:Spec.Malformed*' 's/END closes RANGEs \\\\/END closes loops \\\\/'
mutate extra_kernel_ast_row 'Spec.KernelAst*' 's/^spec\\_kernel\\_ast.group & .*$/&\nspec\\_kernel\\_ast.frob \& \\op{Frob} \& - \\\\/'
mutate remove_kernel_graph_row 'Spec.KernelAst*' '/^spec\\_kernel\\_graph.after\\_other &/d'
mutate untied_rule 'Spec.EveryContract*' 's/ \& Assign.MismatchesAreErrors \& raises; values \\\\/ \& \& raises; values \\\\/'
mutate missing_test 'Spec.EveryContract*' 's/Assign.AnExecutedAssignmentIsNotRunAgain/Assign.NoSuchTest/'
mutate wrong_shift 'Devices/SpecSemantics.*/INTERP' 's/^\\op{Shr} & int & \\sem{a >> b}/\\op{Shr} \& int \& \\sem{a << b}/'
mutate remove_shift_row 'Spec.EveryElementwiseOp*' '/^\\op{Shl} & int/d'
mutate remove_threefry_row 'Spec.EveryElementwiseOp*' '/^\\op{ThreeFry} & uint64/d'
mutate cast_rounds 'Devices/SpecSemantics.Conversions*/INTERP' 's/\\sem{trunc(a) if abs(a)/\\sem{floor(a) if abs(a)/'
mutate cast_limit 'Devices/SpecSemantics.Conversions*/INTERP' 's/< 2\*\*119 else 0}/< 2**63 else 0}/'
mutate cast_to_bool 'Devices/SpecSemantics.Conversions*/INTERP' 's/& bool & \\sem{a != 0}/\& bool \& \\sem{a == 0}/'
mutate remove_bitcast_row 'Spec.EveryElementwiseOp*' '/^\\op{Bitcast} & int/d'
mutate widen_max 'Spec.Ranges*' 's/\\sem{\[max(a, b), max(A, B)\]}/\\sem{[min(a, b), max(A, B)]}/'
mutate widen_range_op 'Spec.Ranges*' 's/^\\op{Range} & always & \\sem{\[0, A - 1\]}/\\op{Range} \& always \& \\sem{[0, A]}/'
mutate widen_cmod 'Spec.Ranges*' 's/0 if A < 0 else min(A, b - 1)\]}/0 if A < 0 else b - 1]}/'
mutate remove_sub_range_row 'Spec.EveryOpWithARangeRule*' '/^\\op{Sub} & always/d'
mutate device_copy 'Spec.Devices*' 's/^\\op{Copy} & \\sem{arg}/\\op{Copy} \& \\sem{first(src)}/'
mutate device_after 'Spec.Devices*' 's/^\\op{After} & \\sem{src\[0\]}/\\op{After} \& \\sem{first(src)}/'
mutate device_mselect 'Spec.Devices*' 's/^\\op{MSelect} & \\sem{src\[0\]\[arg\]}/\\op{MSelect} \& \\sem{first(src)}/'
mutate remove_device_row 'Spec.Devices*' '/^\\op{Stage} & \\sem{arg.device else src\[0\]}/d'
mutate pipeline_order 'Spec.PipelineTable*' '/^apply rangeify & /{h;d};/^cleanups & /G'
mutate pipeline_file 'Spec.PipelineTable*' 's/^add loads & add\\_loads & rules\/devectorizer.rw/add loads \& add\\_loads \& rules\/linearize.rw/'
mutate pipeline_missing_stage 'Spec.PipelineTable*' '/^merge reduce ends & /d'
mutate pipeline_unknown_set 'Spec.PipelineTable*' 's/^expander & expander & /expander \& expandr \& /'
mutate contract_retarget 'Spec.EveryContract*' 's/& Assign.GradientFlowsThroughAFullOverwriteToTheStoredValue & gradient/\& Assign.MismatchesAreErrors \& gradient/'
mutate contract_swap 'Spec.EveryContract*' 's/Assign.AnExecutedAssignmentIsNotRunAgain &/Assign.TMP \&/;s/Assign.AnExecutedCloneKeepsItsDataInFreshStorage &/Assign.AnExecutedAssignmentIsNotRunAgain \&/;s/Assign.TMP &/Assign.AnExecutedCloneKeepsItsDataInFreshStorage \&/'
mutate contract_gap 'Spec.EveryContract*' 's/^C5 & /C50 \& /'
mutate cmplt_drop_bool 'Spec.Verifiers*' 's/^\\op{CmpLt} & int float bool &/\\op{CmpLt} \& int float \&/'
mutate add_drop_bool 'Spec.Verifiers*' 's/^\\op{Add} & int float bool &/\\op{Add} \& int float \&/'
mutate sub_add_bool 'Devices/SpecSemantics.*/INTERP' 's/^\\op{Sub} & int float &/\\op{Sub} \& int float bool \&/'
mutate conv_saturate 'Devices/SpecSemantics.Conventions*/INTERP' 's/^a signed integer wraps & \\op{Add} & int8 & 127 & 1 & -128/a signed integer saturates \& \\op{Add} \& int8 \& 127 \& 1 \& 127/'
mutate conv_nan_max 'Devices/SpecSemantics.Conventions*/INTERP' 's/^max of NaN is NaN & \\op{Max} & float32 & nan & 1.0 & nan/max ignores NaN \& \\op{Max} \& float32 \& nan \& 1.0 \& 1.0/'
mutate conv_nan_ne 'Devices/SpecSemantics.Conventions*/INTERP' 's/^NaN differs from itself & \\op{CmpNe} & float32 & nan & nan & True/NaN equals itself \& \\op{CmpNe} \& float32 \& nan \& nan \& False/'
mutate conv_div_zero 'Devices/SpecSemantics.Conventions*/INTERP' 's/^integer division by zero raises & \\op{CDiv} & int32 & 7 & 0 & error/integer division by zero gives 0 \& \\op{CDiv} \& int32 \& 7 \& 0 \& 0/'
mutate conv_half_tie 'Devices/SpecSemantics.Conventions*/INTERP' 's/& float16 & 2048.0 & 3.0 & 2052.0/\& float16 \& 2048.0 \& 3.0 \& 2050.0/'
mutate conv_neg_zero 'Devices/SpecSemantics.Conventions*/INTERP' 's/& \\op{Reciprocal} & float32 & -0.0 & - & -inf/\& \\op{Reciprocal} \& float32 \& -0.0 \& - \& inf/'
mutate conv_cast_nan 'Devices/SpecSemantics.Conventions*/INTERP' 's/& \\op{Cast} & float32 int32 & nan & - & 0/\& \\op{Cast} \& float32 int32 \& nan \& - \& -2147483648/'
mutate conv_unsigned_shift 'Devices/SpecSemantics.Conventions*/INTERP' 's/& \\op{Shr} & uint8 & 128 & 7 & 1/\& \\op{Shr} \& uint8 \& 128 \& 7 \& -1/'
mutate contract_error_text 'Spec.EveryContract*' 's/^\(C5 & .*\)``cycle'"''"'/\1``loop'"''"'/'
mutate contract_observable 'Spec.EveryContract*' 's/^\(C9 & .*\) & values; node \\\\/\1 \& values; kernels \\\\/'
mutate space_devices 'Spec.AddressSpaces*' 's/^\\sem{REG} & \(.*\) & INTERP CPU/\\sem{REG} \& \1 \& -/'
mutate space_removed 'Spec.AddressSpaces*' '/^\\sem{LOCAL} & memory shared/d'
mutate reduce_identity 'Spec.ReduceOps*' 's/^\\op{Mul} & 1 & prod/\\op{Mul} \& 0 \& prod/'
mutate reduce_removed 'Spec.ReduceOps*' '/^\\op{Max} & -inf & max/d'
mutate reduce_extra 'Spec.ReduceOps*' 's/^\\op{Mul} & 1 & prod \\\\/&\n\\op{And} \& 1 \& prod \\\\/'
mutate threefry_args 'Devices/SpecSemantics.*/INTERP' 's/\\sem{threefry2x32(a, b)}/\\sem{threefry2x32(b, a)}/'
mutate optops_limit 'Spec.OptOps*' 's/^\\sem{UPCAST} & all & GLOBAL LOCAL WEAK LOOP & UPCAST & 16/\\sem{UPCAST} \& all \& GLOBAL LOCAL WEAK LOOP \& UPCAST \& 8/'
mutate optops_applies 'Spec.OptOps*' 's/^\\sem{LOCAL} & all & GLOBAL WEAK LOOP &/\\sem{LOCAL} \& all \& GLOBAL WEAK LOOP REDUCE \&/'
mutate optops_splits 'Spec.OptOps*' 's/^\\sem{GROUPTOP} & these & REDUCE & GROUP\\_REDUCE/\\sem{GROUPTOP} \& these \& REDUCE \& LOCAL/'
mutate optops_targets 'Spec.OptOps*' 's/^\\sem{THREAD} & all & WEAK LOOP & THREAD & - & threads/\\sem{THREAD} \& all \& WEAK LOOP \& THREAD \& - \& all/'
mutate optops_order 'Spec.OptOps*' '/^\\sem{UNROLL} & /{h;d};/^\\sem{LOCAL} & /G'
mutate memory_stack 'Spec.MemoryOps*' 's/^\\op{Stack} & \\sem{(n,) + s0}/\\op{Stack} \& \\sem{s0}/'
mutate memory_index 'Spec.MemoryOps*' 's/\\sem{n - 1 <= rank(s0)}/\\sem{n <= rank(s0)}/'
mutate memory_store 'Spec.MemoryOps*' 's/^\\op{Store} & \\sem{s0} & \\sem{void}/\\op{Store} \& \\sem{s0} \& \\sem{d0}/'
mutate movement_pad_fill 'Spec.MovementOps*' 's/\\sem{\[\[0, 0, 0\], \[1, 2, 0\], \[3, 4, 0\]\]}/\\sem{[[1, 1, 1], [1, 2, 1], [3, 4, 1]]}/'
mutate movement_reshape_order 'Spec.MovementOps*' 's/\\sem{(3, 2)} & \\sem{\[\[1, 2\], \[3, 4\], \[5, 6\]\]}/\\sem{(3, 2)} \& \\sem{[[1, 4], [2, 5], [3, 6]]}/'
mutate movement_flip_axis 'Spec.MovementOps*' 's/\\sem{(1,)} & \\sem{\[\[3, 2, 1\], \[6, 5, 4\]\]}/\\sem{(0,)} \& \\sem{[[3, 2, 1], [6, 5, 4]]}/'
mutate compare_result 'Devices/SpecSemantics.*/INTERP' 's/^\(\\op{CmpLt} & .*\) & bool \\\\/\1 \& a \\\\/'
mutate where_result 'Devices/SpecSemantics.*/INTERP' 's/^\(\\op{Where} & .*\) & b \\\\/\1 \& a \\\\/'
[ $fail -eq 0 ] && echo "all mutations detected"
exit $fail
