# kernels/lower_ptx_version.cmake - copies a PTX file with its `.version`
# directive set to VERSION, so an older ptxas (FP8Q_PTXAS in CMakeLists.txt)
# assembles what a newer nvcc wrote. That ptxas still refuses every
# instruction or directive its PTX ISA lacks, so a kernel that needs the
# newer ISA fails the build rather than being miscompiled.
#
# Run at build time by CMakeLists.txt (add_custom_command):
#   cmake -DINPUT=<file.ptx> -DOUTPUT=<file.ptx> -DVERSION=8.8
#         -P kernels/lower_ptx_version.cmake
foreach(argument INPUT OUTPUT VERSION)
  if(NOT DEFINED ${argument})
    message(FATAL_ERROR "lower_ptx_version.cmake: -D${argument}=... is required")
  endif()
endforeach()

file(READ "${INPUT}" ptx)
string(REGEX MATCH "\n\\.version ([0-9]+\\.[0-9]+)\n" directive "\n${ptx}")
if(directive STREQUAL "")
  message(FATAL_ERROR "lower_ptx_version.cmake: ${INPUT} has no .version directive")
endif()
if(CMAKE_MATCH_1 VERSION_GREATER VERSION)
  string(REPLACE "${directive}" "\n.version ${VERSION}\n" ptx "\n${ptx}")
  string(SUBSTRING "${ptx}" 1 -1 ptx)
endif()
file(WRITE "${OUTPUT}" "${ptx}")
