# bash completion for dlock. The options come from `dlock CMD --help`, so they stay in step with
# the tool; lock names and the COMMAND after `--` are left to the default completion.
_dlock() {
  local cur=${COMP_WORDS[COMP_CWORD]} cmd="" i
  for ((i = 1; i < COMP_CWORD; i++)); do
    [[ ${COMP_WORDS[i]} == -- ]] && { COMPREPLY=(); compopt -o default 2>/dev/null; return; }
    [[ ${COMP_WORDS[i]} != -* ]] && { cmd=${COMP_WORDS[i]}; break; }
  done
  if [[ -z $cmd ]]; then
    COMPREPLY=($(compgen -W "run status release watch sandbox demo --help --version" -- "$cur"))
    return
  fi
  if [[ $cur == -* ]]; then
    local opts
    opts=$("${COMP_WORDS[0]}" "$cmd" --help 2>/dev/null | grep -oE -- '(^|[ ,])--?[A-Za-z][-A-Za-z0-9]*' |
      tr -d ' ,' | sort -u)
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  fi
}
complete -F _dlock dlock
