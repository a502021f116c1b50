# kernels/embed_binary.cmake - writes a binary file as a plain C11 array, so the
# C compiler embeds it without .incbin, bin2c or any CUDA header.
#
# Run at build time by CMakeLists.txt (add_custom_command):
#   cmake -DINPUT=<file> -DOUTPUT=<file.c> -DSYMBOL=<name> -DHEADER=<include>
#         -P kernels/embed_binary.cmake
# The .c file defines
#   const unsigned char <SYMBOL>[];   (64-byte aligned)
#   const size_t <SYMBOL>_size;
# and includes HEADER, which declares them.
foreach(argument INPUT OUTPUT SYMBOL HEADER)
  if(NOT DEFINED ${argument})
    message(FATAL_ERROR "embed_binary.cmake: -D${argument}=... is required")
  endif()
endforeach()

file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hex_length)
if(hex_length EQUAL 0)
  message(FATAL_ERROR "embed_binary.cmake: ${INPUT} is empty")
endif()
math(EXPR size "${hex_length} / 2")
# 16 bytes per line: "0xab," per byte, then a newline and indentation.
string(REGEX REPLACE "(................................)" "\\1\n    " hex "${hex}")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
get_filename_component(input_name "${INPUT}" NAME)

file(WRITE "${OUTPUT}.tmp" "/*
 * ${input_name} (${size} bytes) as a C array. Generated at build time by
 * kernels/embed_binary.cmake; never edit or commit it.
 */
#include <stddef.h>

#include \"${HEADER}\"

_Alignas(64) const unsigned char ${SYMBOL}[] = {
    ${bytes}
};

const size_t ${SYMBOL}_size = sizeof ${SYMBOL};
")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
