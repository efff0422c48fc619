# tinyrw_generate_rules(OUT_VAR DIR): one rwc-generated matcher source per DIR/*.rw, and its
# header of typed accessors (`rules::lower()`), rules_gen/<stem>.h under the calling directory's
# binary dir (put that dir on the include path: `#include "rules_gen/rangeify.h"`). The headers
# are listed in OUT_VAR_HEADERS; a target including them lists them among its sources, so they
# exist before it compiles.
# rwc writes a depfile with the files it included, so editing one .rw file regenerates (and
# recompiles) only the matchers that depend on it; rebuilding rwc regenerates all of them, and
# outputs whose text did not change keep their timestamps (nothing recompiles: a header changes
# only when a rule set is added, removed or renamed).
# Called from the directory that defines the target compiling the outputs (a CMake requirement).
function(tinyrw_generate_rules out_var dir)
  file(GLOB rule_files CONFIGURE_DEPENDS ${dir}/*.rw)
  set(gen_dir ${CMAKE_CURRENT_BINARY_DIR}/rules_gen)
  file(MAKE_DIRECTORY ${gen_dir})
  set(sources)
  set(headers)
  foreach(rw_file ${rule_files})
    get_filename_component(stem ${rw_file} NAME_WE)
    file(RELATIVE_PATH shown ${PROJECT_SOURCE_DIR} ${rw_file})
    set(out ${gen_dir}/${stem}.cpp)
    set(header ${gen_dir}/${stem}.h)
    add_custom_command(
      OUTPUT ${out} ${header}
      COMMAND rwc compile ${rw_file} -o ${out} --header ${header} --depfile ${out}.d --name ${shown}
      DEPENDS rwc ${rw_file}
      DEPFILE ${out}.d
      COMMENT "rwc ${shown}"
      VERBATIM)
    list(APPEND sources ${out})
    list(APPEND headers ${header})
  endforeach()
  set(${out_var} ${sources} PARENT_SCOPE)
  set(${out_var}_HEADERS ${headers} PARENT_SCOPE)
endfunction()
