# cmake -DINPUT=file -DOUTPUT=file.c -DNAME=symbol -P embed.cmake
# Writes a C file defining `const unsigned char NAME[]` (the bytes of INPUT plus a NUL) and
# `const size_t NAME_len` (without the NUL), so a data file travels inside the binary.
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR bytes "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){16})" "\\1\n" body "${body}")
file(WRITE "${OUTPUT}" "/* generated from ${INPUT} by cmake/embed.cmake; do not edit */\n#include <stddef.h>\nconst unsigned char ${NAME}[] = {\n${body}0x00};\nconst size_t ${NAME}_len = ${bytes};\n")
