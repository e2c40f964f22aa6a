# dockhand_set_warnings(target): the project's warning flags, errors when DOCKHAND_WERROR is on.
function(dockhand_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow -Wnon-virtual-dtor
                                           -Wformat=2 -Wimplicit-fallthrough)
  if(DOCKHAND_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
